package node

import (
	"errors"
	"fmt"
)

// withMinPages returns a copy of a wasm binary whose one defined memory starts with at least
// pages pages. Runs restore a snapshot of that size; starting the instance at the size avoids
// growing (reallocating and copying) its memory on every run.
func withMinPages(wasm []byte, pages uint32) ([]byte, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, errors.New("not a wasm binary")
	}
	out := make([]byte, 0, len(wasm)+8)
	out = append(out, wasm[:8]...)
	found := false
	for pos := 8; pos < len(wasm); {
		id := wasm[pos]
		size, n, err := uleb(wasm[pos+1:])
		if err != nil {
			return nil, fmt.Errorf("section at %d: %w", pos, err)
		}
		start := pos + 1 + n
		end := start + int(size)
		if end > len(wasm) {
			return nil, fmt.Errorf("section at %d overruns the binary", pos)
		}
		if id != 5 { // not the memory section
			out = append(out, wasm[pos:end]...)
			pos = end
			continue
		}
		content := wasm[start:end]
		count, c, err := uleb(content)
		if err != nil {
			return nil, fmt.Errorf("memory section: %w", err)
		}
		if count != 1 {
			return nil, fmt.Errorf("memory section: want one memory, have %d", count)
		}
		flags := content[c]
		if flags > 1 { // shared or 64-bit memories are not what quickjs.wasm has
			return nil, fmt.Errorf("memory section: unexpected limits flags %#x", flags)
		}
		min, m, err := uleb(content[c+1:])
		if err != nil {
			return nil, fmt.Errorf("memory section: %w", err)
		}
		if pages < min {
			pages = min
		}
		body := appendUleb(nil, 1)
		body = append(body, flags)
		body = appendUleb(body, pages)
		body = append(body, content[c+1+m:]...)
		out = append(out, 5)
		out = appendUleb(out, uint32(len(body)))
		out = append(out, body...)
		found = true
		pos = end
	}
	if !found {
		return nil, errors.New("no memory section")
	}
	return out, nil
}

func uleb(b []byte) (uint32, int, error) {
	var v uint32
	for i := 0; i < len(b) && i < 5; i++ {
		v |= uint32(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errors.New("bad LEB128")
}

func appendUleb(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
