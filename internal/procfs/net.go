package procfs

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// NetBytes sums the received and transmitted bytes of every interface but loopback in the
// network namespace of process pid, as the kernel counts them.
func NetBytes(pid int) (rx, tx int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/net/dev", pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(name) == "lo" {
			continue
		}
		// Receive: bytes packets errs drop fifo frame compressed multicast; then transmit.
		fields := strings.Fields(rest)
		if len(fields) < 9 {
			continue
		}
		if n, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			rx += n
		}
		if n, err := strconv.ParseInt(fields[8], 10, 64); err == nil {
			tx += n
		}
	}
	return rx, tx
}
