package process

// DropControl closes the driver's end of the control socket and nothing else, as the death of the
// airlock process that made the sandbox would.
func (s *Sandbox) DropControl() { s.ctl.close() }

// StateDir is the level's state dir (its init sockets are in run/).
func (d *Driver) StateDir() string { return d.cfg.StateDir }
