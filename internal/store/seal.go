package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Webhook secrets are stored sealed (AES-256-GCM, the webhook's ID as additional data) with a
// key kept beside the database in a file of its own, so that the database file alone (a copy, a
// backup, a mount of it) does not give away what signs deliveries.

// sealPrefix marks a sealed value; values without it were stored by an airlock that sealed
// nothing, and are sealed when the store opens.
const sealPrefix = "sealed1:"

// SealKeySize is the size of a seal key: AES-256.
const SealKeySize = 32

// LoadSealKey reads the seal key at path, creating it (mode 0600, random) if it does not exist.
func LoadSealKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key := make([]byte, SealKeySize)
		rand.Read(key)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			return LoadSealKey(path) // another process made it first
		}
		if err != nil {
			return nil, fmt.Errorf("seal key: %w", err)
		}
		if _, err := f.Write(key); err != nil {
			f.Close()
			return nil, fmt.Errorf("seal key: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("seal key: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("seal key: %w", err)
	}
	if len(b) != SealKeySize {
		return nil, fmt.Errorf("seal key %s: %d bytes, want %d", path, len(b), SealKeySize)
	}
	return b, nil
}

func (s *Store) aead() (cipher.AEAD, error) {
	block, err := aes.NewCipher(s.sealKey)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// seal returns v sealed for the record id; without a key, v as it is.
func (s *Store) seal(id, v string) (string, error) {
	if s.sealKey == nil || v == "" {
		return v, nil
	}
	g, err := s.aead()
	if err != nil {
		return "", err
	}
	nonce := make([]byte, g.NonceSize())
	if _, err := io.ReadFull(rand.Reader, nonce); err != nil {
		return "", fmt.Errorf("seal: nonce: %w", err)
	}
	return sealPrefix + base64.StdEncoding.EncodeToString(g.Seal(nonce, nonce, []byte(v), []byte(id))), nil
}

// unseal reverses seal; a value stored unsealed comes back as it is.
func (s *Store) unseal(id, v string) (string, error) {
	enc, ok := strings.CutPrefix(v, sealPrefix)
	if !ok {
		return v, nil
	}
	if s.sealKey == nil {
		return "", fmt.Errorf("%s is sealed, and this store has no seal key", id)
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("%s: sealed value: %w", id, err)
	}
	g, err := s.aead()
	if err != nil {
		return "", err
	}
	if len(b) < g.NonceSize() {
		return "", fmt.Errorf("%s: sealed value too short", id)
	}
	out, err := g.Open(nil, b[:g.NonceSize()], b[g.NonceSize():], []byte(id))
	if err != nil {
		return "", fmt.Errorf("%s: the seal key does not open its secret: %w", id, err)
	}
	return string(out), nil
}

// sealStored seals the webhook secrets an earlier airlock stored in the clear.
func (s *Store) sealStored(ctx context.Context) error {
	if s.sealKey == nil {
		return nil
	}
	rows, err := s.write.QueryContext(ctx, `SELECT id, secret FROM webhooks WHERE secret != '' AND secret NOT LIKE ?`, sealPrefix+"%")
	if err != nil {
		return fmt.Errorf("seal webhook secrets: %w", err)
	}
	plain := map[string]string{}
	for rows.Next() {
		var id, v string
		if err := rows.Scan(&id, &v); err != nil {
			rows.Close()
			return err
		}
		plain[id] = v
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if len(plain) == 0 {
		return nil
	}
	// The clear values are overwritten where they lay, not left in free pages.
	if _, err := s.write.ExecContext(ctx, `PRAGMA secure_delete = 1`); err != nil {
		return err
	}
	// Should the reset fail, the one writer connection goes on overwriting what it deletes:
	// slower, nothing lost.
	defer func() { _, _ = s.write.ExecContext(ctx, `PRAGMA secure_delete = 0`) }()
	for id, v := range plain {
		sealed, err := s.seal(id, v)
		if err != nil {
			return err
		}
		if _, err := s.write.ExecContext(ctx, `UPDATE webhooks SET secret = ? WHERE id = ?`, sealed, id); err != nil {
			return fmt.Errorf("seal webhook %s's secret: %w", id, err)
		}
	}
	s.log.Info("sealed webhook secrets stored in the clear", "webhooks", len(plain))
	_, err = s.write.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}
