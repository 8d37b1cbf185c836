package sandbox

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseMiB parses a size like 512M, 1G, 1.5g, 256MiB, 512m or a bare number of MiB into MiB.
func ParseMiB(v string) (int64, error) {
	s := strings.ToUpper(strings.TrimSpace(v))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	mult := 1.0 / 1024 // K
	switch {
	case strings.HasSuffix(s, "K"):
	case strings.HasSuffix(s, "M"):
		mult = 1
	case strings.HasSuffix(s, "G"):
		mult = 1024
	case strings.HasSuffix(s, "T"):
		mult = 1024 * 1024
	default:
		s += "M"
		mult = 1
	}
	x, err := strconv.ParseFloat(s[:len(s)-1], 64)
	if err != nil || x <= 0 {
		return 0, fmt.Errorf("%q is not a size (examples: 512M, 2G)", v)
	}
	mib := x * mult
	if mib != float64(int64(mib)) {
		return 0, fmt.Errorf("%q is not a whole number of MiB", v)
	}
	return int64(mib), nil
}
