package container

import (
	"github.com/airlockrun/airlock/internal/driver"
)

// hostLayer is a bundle's writable layer as the host reads it (driver.Layerer, through
// host.Launcher.Writable): the bundle's layer/ tmpfs, on the host under both runtimes — runsc
// runs with --overlay2=none, so gVisor keeps no layer of its own in memory, and its gofer writes
// every file through to the host (a file still open in the sandbox may have data gVisor has not
// written back yet). lowers are the image's layer directories under layer/upper, top first.
func hostLayer(b *bundle, lowers []string) *driver.Layer {
	return &driver.Layer{Dir: b.layer, Layout: LayerLayout, Lowers: lowers}
}
