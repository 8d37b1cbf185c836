package front

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/kube/kubeapi"
	"github.com/airlockrun/airlock/internal/query"
)

// The tenant's reads that span the cluster (docs/kubernetes.md#the-front-api): what the nodes
// offer, the tenant's snapshots and events. Each is asked of every live airlock node at once,
// as the tenant, bounded per node in time (nodeCallFor) and size (maxNodeAnswer), and merged;
// a node that is lost or does not answer is left out, and the answer says so in the header
// HeaderMissing.

// HeaderMissing lists, on a merged answer, the nodes left out of it and why: "airlock-2 (lost),
// airlock-3 (node airlock-3 did not answer: ...)". Absent when every node answered.
const HeaderMissing = "Airlock-Missing-Nodes"

// liveNodes are the cluster's airlock nodes, those the front holds lost apart.
func (f *Front) liveNodes() (live, lost []string, err error) {
	ns, err := f.nodes.List(labels.SelectorFromSet(labels.Set{kubeapi.NodeLabel: "true"}))
	if err != nil {
		return nil, nil, err
	}
	for _, n := range ns {
		if f.isLost(n.Name) {
			lost = append(lost, n.Name)
		} else {
			live = append(live, n.Name)
		}
	}
	slices.Sort(live)
	slices.Sort(lost)
	return live, lost, nil
}

// fromNodes GETs path from every live airlock node as c's tenant, at once, and returns the
// answers by node and, by node, why one is missing (lost, or its error).
func fromNodes[T any](ctx context.Context, f *Front, c caller, path string) (map[string]T, map[string]error, error) {
	live, lost, err := f.liveNodes()
	if err != nil {
		return nil, nil, err
	}
	got := map[string]T{}
	missing := map[string]error{}
	for _, n := range lost {
		missing[n] = errLost
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range live {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, nodeCallFor)
			defer cancel()
			var v T
			err := f.nodeDo(cctx, n, c.tenant, http.MethodGet, path, nil, &v)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				f.log.Warn("a node's part of a merged read", "node", n, "path", path, "err", err)
				missing[n] = err
				return
			}
			got[n] = v
		})
	}
	wg.Wait()
	return got, missing, nil
}

// sayMissing puts the nodes left out of a merged answer in its HeaderMissing header.
func sayMissing(w http.ResponseWriter, missing map[string]error) {
	if len(missing) == 0 {
		return
	}
	parts := make([]string, 0, len(missing))
	for n, why := range missing {
		parts = append(parts, fmt.Sprintf("%s (%s)", n, strings.ReplaceAll(why.Error(), ",", ";")))
	}
	slices.Sort(parts)
	w.Header().Set(HeaderMissing, strings.Join(parts, ", "))
}

// errLost is a lost node's part of a merged answer.
var errLost = errors.New("lost")

// byNode is m's values in the order of their nodes' names.
func byNode[T any](m map[string]T) []T {
	out := make([]T, 0, len(m))
	for _, n := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[n])
	}
	return out
}

// frontOnly are the features the front does not serve whatever the nodes have, with why.
var frontOnly = map[string]string{
	"webhooks": "not served by the front API (docs/kubernetes.md#the-front-api)",
	"tools":    "not served by the front API (docs/kubernetes.md#the-front-api)",
	"mcp":      "not served by the front API (docs/kubernetes.md#the-front-api)",
}

// capabilities is what the cluster offers: a level is available when a live node offers it
// (a create of it is placed on one that does: its runtime class's node selector), a feature when
// every live node has it (a create may land on any of them).
func (f *Front) capabilities(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	got, missing, err := fromNodes[api.Capabilities](r.Context(), f, c, "/api/v1/capabilities")
	if err != nil {
		return nil, 0, err
	}
	if len(got) == 0 {
		return nil, 0, errdefs.New(errdefs.ErrServiceUnavailable, "no airlock node answered: %v", missing)
	}
	sayMissing(w, missing)
	return mergeCapabilities(byNode(got)), http.StatusOK, nil
}

// mergeCapabilities merges the nodes' capabilities (in the order of their names).
func mergeCapabilities(caps []api.Capabilities) api.Capabilities {
	out := api.Capabilities{Version: caps[0].Version, DefaultIsolation: "container", Features: map[string]bool{}, Reasons: map[string]string{}}
	at := map[string]int{}
	for _, cp := range caps {
		for _, l := range cp.Levels {
			j, ok := at[l.Level]
			if !ok {
				at[l.Level] = len(out.Levels)
				out.Levels = append(out.Levels, l)
				continue
			}
			if l.Available && !out.Levels[j].Available {
				out.Levels[j] = l
			}
			if l.Available {
				out.Levels[j].Features = union(out.Levels[j].Features, l.Features)
			}
		}
	}
	for _, cp := range caps {
		for name := range cp.Features {
			out.Features[name] = true
		}
	}
	for name := range out.Features {
		for _, cp := range caps {
			if !cp.Features[name] {
				out.Features[name] = false
				if why := cp.Reasons[name]; why != "" {
					out.Reasons[name] = why
				}
			}
		}
	}
	for name, why := range frontOnly {
		out.Features[name], out.Reasons[name] = false, why
	}
	return out
}

func union(a, b []string) []string {
	for _, x := range b {
		if !slices.Contains(a, x) {
			a = append(a, x)
		}
	}
	return a
}

// templates are the root filesystem templates the tenant may name on some live node (by name;
// the first node's, in the order of their names, describes one).
func (f *Front) templates(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	got, missing, err := fromNodes[[]api.TemplateInfo](r.Context(), f, c, "/api/v1/templates")
	if err != nil {
		return nil, 0, err
	}
	sayMissing(w, missing)
	out := []api.TemplateInfo{}
	for _, ts := range byNode(got) {
		for _, t := range ts {
			if !slices.ContainsFunc(out, func(o api.TemplateInfo) bool { return o.Name == t.Name }) {
				out = append(out, t)
			}
		}
	}
	return out, http.StatusOK, nil
}

// snapshots are the tenant's snapshots on every live node, newest first.
func (f *Front) snapshots(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	got, missing, err := fromNodes[[]api.Snapshot](r.Context(), f, c, "/api/v1/snapshots")
	if err != nil {
		return nil, 0, err
	}
	sayMissing(w, missing)
	out := []api.Snapshot{}
	for _, ss := range byNode(got) {
		out = append(out, ss...)
	}
	slices.SortStableFunc(out, func(a, b api.Snapshot) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, http.StatusOK, nil
}

// events is the tenant's audit events of every live node, merged in time order, a page at a time
// (docs/kubernetes.md#events-across-nodes). Each node numbers its own events, so the front's
// cursor is a time: next is the last event's time in Unix nanoseconds, and after=N asks each
// node for its events from N+1 ns on. Following is one sandbox's (its node's): the tenant-wide
// follow is not served.
func (f *Front) events(w http.ResponseWriter, r *http.Request, c caller) (any, int, error) {
	q := r.URL.Query()
	if v := q.Get("follow"); v != "" {
		if b, err := strconv.ParseBool(v); err != nil || b {
			return nil, 0, errdefs.New(errdefs.ErrNotImplemented, "follow=%s: the front API pages the tenant's events across nodes but does not follow them; follow one sandbox's (GET /api/v1/sandboxes/{id}/events?follow=true)", v)
		}
	}
	if r.Header.Get("Last-Event-ID") != "" {
		return nil, 0, errdefs.Invalid("Last-Event-ID", "the front API does not follow the tenant's events across nodes")
	}
	after, err := query.Int(q, "after")
	if err != nil {
		return nil, 0, err
	}
	limit, err := query.Int(q, "limit")
	switch {
	case err != nil:
		return nil, 0, err
	case limit > 10000:
		return nil, 0, errdefs.Invalid("limit", "must be at most 10000 (got %d)", limit)
	case limit == 0:
		limit = 1000
	}
	nq := url.Values{"limit": {strconv.FormatInt(limit, 10)}}
	for _, k := range []string{"type", "executionId", "sandboxId", "until"} {
		if v := q.Get(k); v != "" {
			nq.Set(k, v)
		}
	}
	since := time.Time{}
	if v := q.Get("since"); v != "" {
		if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return nil, 0, errdefs.Invalid("since", "must be a time in RFC 3339 form, e.g. 2026-11-21T10:00:00Z (got %q)", v)
		}
	}
	if after > 0 {
		if from := time.Unix(0, after+1); from.After(since) {
			since = from
		}
	}
	if !since.IsZero() {
		nq.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	got, missing, err := fromNodes[api.EventPage](r.Context(), f, c, "/api/v1/events?"+nq.Encode())
	if err != nil {
		return nil, 0, err
	}
	sayMissing(w, missing)
	return mergeEvents(byNode(got), int(limit), after), http.StatusOK, nil
}

// mergeEvents merges the nodes' pages in time order into one of at most limit events, cut
// between two distinct times (so that the next page, from the last one's time on, misses none
// of another node's events of the same nanosecond) unless that would leave it empty. Its next is
// the last event's time in Unix nanoseconds (after, when it has none).
func mergeEvents(pages []api.EventPage, limit int, after int64) api.EventPage {
	var all []api.Event
	for _, p := range pages {
		all = append(all, p.Events...)
	}
	slices.SortStableFunc(all, func(a, b api.Event) int { return a.Time.Compare(b.Time) })
	if len(all) > limit {
		cut := limit
		for cut > 0 && all[cut-1].Time.Equal(all[cut].Time) {
			cut--
		}
		if cut == 0 {
			cut = limit
		}
		all = all[:cut]
	}
	out := api.EventPage{Events: all, Next: after}
	if all == nil {
		out.Events = []api.Event{}
	}
	if n := len(all); n > 0 {
		out.Next = all[n-1].Time.UnixNano()
	}
	return out
}
