// Package query reads the API's query parameters the same way wherever they are served: the
// daemon (internal/server) and the cluster's front API (internal/kube/front).
package query

import (
	"net/url"
	"strconv"

	"github.com/airlockrun/airlock/internal/errdefs"
)

// Int reads an optional non-negative integer query parameter (0 when absent); anything else is
// an invalid argument naming it.
func Int(q url.Values, name string) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, errdefs.Invalid(name, "must be a non-negative integer (got %q)", v)
	}
	return n, nil
}
