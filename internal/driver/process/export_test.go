package process

// StateDir is the level's state dir (its init sockets are in run/).
func (d *Driver) StateDir() string { return d.cfg.StateDir }
