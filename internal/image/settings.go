package image

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
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
	// Mirrors pull a registry's images from another registry host, by the registry's name:
	// {"docker.io": "mirror.example.com:5000"}. The image keeps its own reference (an image
	// approved as docker.io/org/app:1 stays that, whichever host served it); images.registries
	// and images.allowed are checked against it, and the mirror's host against
	// allowPrivateNetworks like any registry's.
	Mirrors map[string]string `json:"mirrors"`
}

// DefaultSettings returns the section's defaults.
func DefaultSettings() Settings { return Settings{MaxImageSizeMb: DefaultMaxImageBytes >> 20} }

// Validate checks the section.
func (s Settings) Validate() error {
	if s.MaxImageSizeMb < 1 {
		return errors.New("maxImageSizeMb must be ≥ 1")
	}
	for reg, m := range s.Mirrors {
		if _, err := name.NewRegistry(reg); err != nil || reg == "" {
			return fmt.Errorf("mirrors: %q is not a registry host", reg)
		}
		if _, err := name.NewRegistry(m); err != nil || m == "" || strings.Contains(m, "/") {
			return fmt.Errorf("mirrors[%s]: %q is not a registry host (HOST or HOST:PORT)", reg, m)
		}
	}
	return nil
}

// Store returns the directory of the store of the airlock keeping its state in dataDir, and the
// store's options (without the tenants' bounds, which the caller adds).
func (s Settings) Store(dataDir string) (string, Options) {
	return filepath.Join(dataDir, "images"), Options{MaxImageBytes: s.MaxImageSizeMb << 20, Mirrors: s.Mirrors}
}
