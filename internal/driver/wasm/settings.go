package wasm

import (
	"errors"
	"path/filepath"
	"time"
)

// Settings is the "wasm" section of airlock's configuration file, as an operator writes it;
// package levels places it in the file and turns it into a Config. Validate's errors begin with
// the field's path inside the section.
type Settings struct {
	// RuntimeDir holds the WebAssembly interpreters as scripts/wasm/*.sh install them:
	// python/ and quickjs/ (default /usr/local/lib/airlock/wasm). Their compiled code is cached
	// in DataDir/wasm/cache.
	RuntimeDir string `json:"runtimeDir"`
	// WorkerIdleSeconds is how long a wasm sandbox's worker (the jailed process that runs its
	// commands) stays after the sandbox's last exec (default 30); the next exec starts another.
	WorkerIdleSeconds int `json:"workerIdleSeconds"`
}

// DefaultSettings returns the section's defaults.
func DefaultSettings() Settings {
	return Settings{RuntimeDir: DefaultRuntimeDir, WorkerIdleSeconds: int(DefaultWorkerIdle / time.Second)}
}

// Validate checks the section.
func (s Settings) Validate() error {
	if w := s.WorkerIdleSeconds; w < 0 || w > 3600 {
		return errors.New("workerIdleSeconds must be between 0 (the default, 30) and 3600")
	}
	return nil
}

// Config returns the level's configuration for the airlock keeping its state in dataDir.
func (s Settings) Config(dataDir string) Config {
	return Config{RuntimeDir: s.RuntimeDir, StateDir: filepath.Join(dataDir, "wasm"),
		WorkerIdle: time.Duration(s.WorkerIdleSeconds) * time.Second}
}
