package wasm

// Abandon lets go of the sandbox as the death of the daemon would: the worker's stream and the
// jail's control socket close, and nothing is killed.
func (s *Sandbox) Abandon() {
	s.mu.Lock()
	w := s.w
	s.w = nil
	s.mu.Unlock()
	s.jail.Abandon()
	if w != nil {
		w.conn.Close()
	}
}
