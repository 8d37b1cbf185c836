package image

import (
	"errors"
	"path/filepath"
)

// Settings is the "images" section of airlock's configuration file, as an operator writes it;
// package levels places it in the file and turns it into the store's directory and Options and
// the tenants' image grants. Validate's errors begin with the field's path inside the section.
type Settings struct {
	// MaxImageSizeMb caps an image's size, compressed and unpacked (default 8192).
	MaxImageSizeMb int64 `json:"maxImageSizeMb"`
	// Allowed are the image references tenants may use besides those already in the store
	// (seed 002's "approved image"): patterns where '*' stands for any run of characters,
	// e.g. "docker.io/library/python:*". Default none: tenants use what the operator pulled.
	Allowed []string `json:"allowed"`
	// Registries are the registry hosts a pull may reach (e.g. "ghcr.io", "docker.io");
	// default any.
	Registries []string `json:"registries"`
	// AllowPrivateNetworks lets pulls reach registries on loopback, private and link-local
	// addresses (a registry on the daemon's own host). Off by default, so that no image
	// reference makes the daemon dial into its own network; metadata addresses never.
	AllowPrivateNetworks bool `json:"allowPrivateNetworks"`
}

// DefaultSettings returns the section's defaults.
func DefaultSettings() Settings { return Settings{MaxImageSizeMb: DefaultMaxImageBytes >> 20} }

// Validate checks the section.
func (s Settings) Validate() error {
	if s.MaxImageSizeMb < 1 {
		return errors.New("maxImageSizeMb must be ≥ 1")
	}
	return nil
}

// Store returns the directory of the store of the airlock keeping its state in dataDir, and the
// store's options (without the tenants' bounds, which the caller adds).
func (s Settings) Store(dataDir string) (string, Options) {
	return filepath.Join(dataDir, "images"), Options{MaxImageBytes: s.MaxImageSizeMb << 20}
}
