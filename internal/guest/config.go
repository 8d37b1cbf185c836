package guest

// Config is what the host sends init (MsgConfig): a complete, host-resolved plan. Init only
// executes it, so every decision about host paths is made on the host side, where errors can name
// the input.
type Config struct {
	Hostname  string     `json:"hostname"`
	Root      RootPlan   `json:"root"`
	UID       int        `json:"uid"`
	GID       int        `json:"gid"`
	NoFile    uint64     `json:"noFile"`    // RLIMIT_NOFILE for commands
	DiskBytes int64      `json:"diskBytes"` // size of the writable layer
	Landlock  bool       `json:"landlock"`  // apply Landlock when the kernel has it
	LandRules []LandRule `json:"landRules,omitempty"`
	Seccomp   []byte     `json:"seccomp"` // the compiled filter, 8 bytes per instruction
	// LayerDevice, when set, is a block device holding the writable layer's file system
	// (LayerFsType), made by the host at DiskBytes: a VM's disk, on which writes past the size
	// get ENOSPC. Otherwise the layer is a tmpfs of DiskBytes.
	LayerDevice string `json:"layerDevice,omitempty"`
	LayerFsType string `json:"layerFsType,omitempty"`
	// OrphanGraceMs, when set, says that ListenFd is a listening socket and how long init keeps the
	// sandbox after its host went away, for a restarted one to connect and adopt it.
	OrphanGraceMs int64 `json:"orphanGraceMs,omitempty"`
	// HostNet says init was started in a network namespace the host made and configured: init
	// has no power over it (not even to bring up lo).
	HostNet bool `json:"hostNet,omitempty"`
	// Container says a container runtime started init with the root filesystem, host name,
	// loopback and cgroup already in place: init only sets its limits, locks down and serves.
	Container bool `json:"container,omitempty"`
	// GuestPids, when set, is the process limit, for init to enforce in the sandbox's own kernel
	// (gVisor; see guestCgroup).
	GuestPids int64 `json:"guestPids,omitempty"`
	// Token, when set, says init dialled its control socket (ControlEnv) and must dial it again
	// when it breaks, presenting Token: a memory snapshot of the sandbox's kernel (gVisor's
	// checkpoint) closes every host socket, in the sandbox it saves and in every copy restored.
	// Init then also relays every exec's standard streams through pipes of the sandbox's own
	// kernel, so that no command ever holds a host descriptor.
	Token string `json:"token,omitempty"`
}

// RootPlan describes the sandbox's root filesystem, for init to build (the process level's).
type RootPlan struct {
	// Lowers are host directories stacked read-only (top first) under an overlay whose upper
	// layer is the writable layer: a --rootfs directory, or an image's layers. None means the
	// host template: bind mounts of the host's /usr and friends under a read-only root.
	Lowers   []string    `json:"lowers,omitempty"`
	LowerFds []int       `json:"lowerFds,omitempty"` // indexes of the Lowers' mount trees
	Binds    []BindMount `json:"binds,omitempty"`
	Symlinks []Symlink   `json:"symlinks,omitempty"`
	Files    []PlainFile `json:"files,omitempty"`
	Dirs     []WriteDir  `json:"dirs,omitempty"` // writable directories inside the layer
	// ReadOnly are sandbox paths made read-only (a read-only bind of each onto itself), after
	// the binds, so that a path inside a writable volume can be one.
	ReadOnly []string `json:"readOnly,omitempty"`
	Blocked  []string `json:"blocked,omitempty"`
	// Seed, when set, is the index of a pipe carrying a snapshot's layer (a tar stream, see
	// internal/snapshot) to extract into the fresh layer before anything else is built on it.
	Seed *int `json:"seed,omitempty"`
}

// BindMount is a mount of the root: a host path's detached mount tree, or an empty cover.
type BindMount struct {
	Src string `json:"src"` // host path, symlinks already resolved
	// Fd is the index, in the config message's file descriptors, of a detached mount tree of Src
	// the host cloned as host root: init mounts through it, so the host path's directory
	// permissions (a 0700 parent, say) do not matter to the unprivileged namespace root.
	Fd       int    `json:"fd"`
	Dst      string `json:"dst"` // sandbox path
	ReadOnly bool   `json:"ro"`
	Dir      bool   `json:"dir"`
	// Empty, instead of a source, covers Dst with an empty directory (a tmpfs), read-only once
	// the binds after it have made their mount points in it: it hides what a bind before it
	// brought there (the host's /usr/local).
	Empty bool `json:"empty,omitempty"`
}

// Symlink is a symbolic link made in the root (the merged-/usr links of the host template).
type Symlink struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// PlainFile is a file written into the root (a generated /etc file).
type PlainFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Mode    uint32 `json:"mode"`
}

// WriteDir is a writable directory of the sandbox, made in the writable layer.
type WriteDir struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode"`
	UID  int    `json:"uid"`
}

// LandRule is a Landlock rule: a path readable and executable, and writable when Write.
type LandRule struct {
	Path  string `json:"path"`
	Write bool   `json:"write"`
}
