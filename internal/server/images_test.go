package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/image"
	"github.com/airlockrun/airlock/internal/image/imagetest"
	"github.com/airlockrun/airlock/internal/testutil"
)

// imageAPI serves the API over a fresh key store and images, and returns its URL and a key.
func imageAPI(t *testing.T, images Images) (url, key string) {
	t.Helper()
	st, _ := openStore(t)
	key = adminKey(t, st, "t1")
	srv := httptest.NewServer(New(Config{}, nil, st, nil, images, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	return srv.URL, key
}

// call sends one request with key ("" for none) and decodes the envelope.
func call(t *testing.T, method, url, key, body string) (int, api.Response[json.RawMessage]) {
	t.Helper()
	status, b := rawCall(t, method, url, key, body)
	var env api.Response[json.RawMessage]
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("%s %s: %d %q: %v", method, url, status, b, err)
	}
	return status, env
}

// TestImageAPI drives the image routes against a real store and an in-process registry: each
// step runs after the previous one, on the same store.
func TestImageAPI(t *testing.T) {
	testutil.RequiresRoot(t, "unpacking preserves owners")
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials of the host's
	host := imagetest.Registry(t)
	base := imagetest.Layer(t, imagetest.File("base", "shared", 0o644))
	ref1 := imagetest.PushLayers(t, host, "api/one:v1", v1.Config{Env: []string{"A=1"}}, base, imagetest.Layer(t, imagetest.File("one", "1", 0o644)))
	ref2 := imagetest.PushLayers(t, host, "api/two:v1", v1.Config{}, base, imagetest.Layer(t, imagetest.File("two", "2", 0o644)))
	var locked atomic.Bool // pushing goes in without credentials
	private := imagetest.RegistryWith(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if locked.Load() {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	privRef := imagetest.PushLayers(t, private, "private/app:v1", v1.Config{}, base)
	locked.Store(true)

	imgs, err := image.Open(t.TempDir(), image.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	url, key := imageAPI(t, Images{Store: imgs})
	var digest1 string

	img := func(ref string, layers int) func(*testing.T, []byte) {
		return func(t *testing.T, data []byte) {
			var got api.Image
			if err := json.Unmarshal(data, &got); err != nil || got.Ref != ref || !strings.HasPrefix(got.Digest, "sha256:") ||
				len(got.Layers) != layers || got.Size <= 0 || got.Pulled.IsZero() {
				t.Errorf("image %s: %v %s", ref, err, data)
			}
			if ref == ref1 {
				digest1 = got.Digest
				if !slices.Equal(got.Config.Env, []string{"A=1"}) {
					t.Errorf("config %+v, want its env", got.Config)
				}
			}
		}
	}
	refs := func(want ...string) func(*testing.T, []byte) {
		return func(t *testing.T, data []byte) {
			var got []api.Image
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("decode %s: %v", data, err)
			}
			var have []string
			for _, g := range got {
				have = append(have, g.Ref)
			}
			if !slices.Equal(have, want) {
				t.Errorf("listed %q, want %q", have, want)
			}
		}
	}
	removal := func(want api.ImageRemoval) func(*testing.T, []byte) {
		return func(t *testing.T, data []byte) {
			var got api.ImageRemoval
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("decode %s: %v", data, err)
			}
			if !slices.Equal(got.Refs, want.Refs) || got.LayersRemoved != want.LayersRemoved || got.LayersInUse != want.LayersInUse ||
				(got.LayersRemoved > 0 && got.BytesFreed <= 0) {
				t.Errorf("removal %s, want %+v", data, want)
			}
		}
	}
	var lease *image.Lease
	runSteps(t, url, key, []apiStep{
		{name: "empty list", method: "GET", path: "/api/v1/images", status: 200, check: refs()},
		{name: "no key", method: "GET", path: "/api/v1/images", noKey: true, status: 401, code: api.CodeUnauthorized},
		{name: "pull", method: "POST", path: "/api/v1/images", body: `{"ref":"` + ref1 + `"}`, status: 201, check: img(ref1, 2)},
		{name: "pull two", method: "POST", path: "/api/v1/images", body: `{"ref":"` + ref2 + `"}`, status: 201, check: img(ref2, 2)},
		{name: "pull again", method: "POST", path: "/api/v1/images", body: `{"ref":"` + ref1 + `"}`, status: 201, check: img(ref1, 2)},
		{name: "list", method: "GET", path: "/api/v1/images", status: 200, check: refs(ref1, ref2)},
		{name: "get", method: "GET", path: "/api/v1/images/" + ref1, status: 200, check: img(ref1, 2)},
		{name: "get with escaped slashes", method: "GET", path: "/api/v1/images/" + strings.ReplaceAll(ref1, "/", "%2F"), status: 200, check: img(ref1, 2)},
		{name: "get by digest", method: "GET", path: "/api/v1/images/{digest1}", status: 200, check: img(ref1, 2)},
		{name: "get unknown", method: "GET", path: "/api/v1/images/" + host + "/api/nope:v1", status: 404, code: api.CodeNotFound, msg: "not in the store"},
		{name: "get bad ref", method: "GET", path: "/api/v1/images/Not%20A%20Ref", status: 400, code: api.CodeInvalidArgument, field: "ref", msg: "not a valid image reference"},
		{name: "get no ref", method: "GET", path: "/api/v1/images/", status: 400, code: api.CodeInvalidArgument, field: "ref"},
		{name: "pull bad ref", method: "POST", path: "/api/v1/images", body: `{"ref":"Not A Ref"}`, status: 400, code: api.CodeInvalidArgument, field: "ref", msg: "not a valid image reference"},
		{name: "pull no ref", method: "POST", path: "/api/v1/images", body: `{}`, status: 400, code: api.CodeInvalidArgument, field: "ref"},
		{name: "pull unknown field", method: "POST", path: "/api/v1/images", body: `{"image":"x"}`, status: 400, code: api.CodeInvalidArgument, field: "image"},
		{name: "pull missing", method: "POST", path: "/api/v1/images", body: `{"ref":"` + host + `/api/missing:v1"}`, status: 404, code: api.CodeNotFound, msg: "not found in registry " + host},
		{name: "pull unreachable", method: "POST", path: "/api/v1/images", body: `{"ref":"127.0.0.1:1/api/x:v1"}`, status: 422, code: api.CodeUnavailable, msg: "unreachable"},
		{name: "pull refused", method: "POST", path: "/api/v1/images", body: `{"ref":"` + privRef + `"}`, status: 422, code: api.CodeUnavailable, msg: "docker login " + private},
		{name: "remove", method: "DELETE", path: "/api/v1/images/" + ref1, status: 200, check: removal(api.ImageRemoval{Refs: []string{ref1}, LayersRemoved: 1})},
		{name: "removed is gone", method: "GET", path: "/api/v1/images/" + ref1, status: 404, code: api.CodeNotFound},
		{name: "remove again", method: "DELETE", path: "/api/v1/images/" + ref1, status: 404, code: api.CodeNotFound},
		{name: "lease two", check: func(t *testing.T, _ []byte) {
			img2, err := imgs.Get(ref2)
			if err == nil {
				lease, err = imgs.Acquire(img2)
			}
			if err != nil {
				t.Fatal(err)
			}
		}},
		{name: "remove in use", method: "DELETE", path: "/api/v1/images/" + ref2, status: 200, check: removal(api.ImageRemoval{Refs: []string{ref2}, LayersInUse: 2})},
		{name: "prune in use", method: "POST", path: "/api/v1/images/prune", status: 200, check: removal(api.ImageRemoval{Refs: []string{}, LayersInUse: 2})},
		{name: "release", check: func(*testing.T, []byte) { lease.Release() }},
		{name: "prune", method: "POST", path: "/api/v1/images/prune", status: 200, check: removal(api.ImageRemoval{Refs: []string{}, LayersRemoved: 2})},
		{name: "empty again", method: "GET", path: "/api/v1/images", status: 200, check: refs()},
	}, func(v string) string { return strings.ReplaceAll(v, "{digest1}", digest1) })
}

// TestImageAPIClient goes through the Go client: its paths reach the routes, and its errors are
// the sentinels.
func TestImageAPIClient(t *testing.T) {
	testutil.RequiresRoot(t, "unpacking preserves owners")
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	host := imagetest.Registry(t)
	ref := imagetest.PushLayers(t, host, "client/app:v1", v1.Config{}, imagetest.Layer(t, imagetest.File("f", "x", 0o644)))
	imgs, err := image.Open(t.TempDir(), image.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	url, key := imageAPI(t, Images{Store: imgs})
	c, err := client.New(url, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	img, err := c.Pull(ctx, ref)
	if err != nil || img.Ref != ref || len(img.Layers) != 1 {
		t.Fatalf("Pull = %+v, %v", img, err)
	}
	if got, err := c.Image(ctx, ref); err != nil || got.Digest != img.Digest {
		t.Errorf("Image = %+v, %v", got, err)
	}
	if got, err := c.Image(ctx, img.Digest); err != nil || got.Ref != ref {
		t.Errorf("Image(digest) = %+v, %v", got, err)
	}
	if list, err := c.Images(ctx); err != nil || len(list) != 1 || list[0].Ref != ref {
		t.Errorf("Images = %+v, %v", list, err)
	}
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"pull bad ref", func() error { _, err := c.Pull(ctx, "Not A Ref"); return err }, client.ErrInvalidArgument},
		{"pull missing", func() error { _, err := c.Pull(ctx, host+"/client/missing:v1"); return err }, client.ErrNotFound},
		{"pull unreachable", func() error { _, err := c.Pull(ctx, "127.0.0.1:1/client/x:v1"); return err }, client.ErrUnavailable},
		{"image unknown", func() error { _, err := c.Image(ctx, "client/nope:v1"); return err }, client.ErrNotFound},
		{"image with a space", func() error { _, err := c.Image(ctx, "a b"); return err }, client.ErrInvalidArgument},
	} {
		if err := tc.call(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if rm, err := c.RemoveImage(ctx, img.Digest); err != nil || !slices.Equal(rm.Refs, []string{ref}) || rm.LayersRemoved != 1 {
		t.Errorf("RemoveImage(digest) = %+v, %v", rm, err)
	}
	if rm, err := c.PruneImages(ctx); err != nil || rm.LayersRemoved != 0 {
		t.Errorf("PruneImages = %+v, %v", rm, err)
	}
}

// TestImageAPIUnavailable: without a store every image route answers 503 with the reason.
func TestImageAPIUnavailable(t *testing.T) {
	url, key := imageAPI(t, Images{Err: errors.New("image store: mkdir /x: read-only file system")})
	for _, r := range [][3]string{
		{"GET", "/api/v1/images", ""},
		{"GET", "/api/v1/images/python:3.12", ""},
		{"POST", "/api/v1/images", `{"ref":"python:3.12"}`},
		{"DELETE", "/api/v1/images/python:3.12", ""},
		{"POST", "/api/v1/images/prune", ""},
	} {
		status, env := call(t, r[0], url+r[1], key, r[2])
		if status != 503 || env.Error == nil || env.Error.Code != api.CodeUnavailable || !strings.Contains(env.Error.Message, "read-only file system") {
			t.Errorf("%s %s: %d %+v, want 503 with the reason", r[0], r[1], status, env.Error)
		}
	}
}
