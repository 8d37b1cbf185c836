package server

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"
)

// update rewrites api/openapi.json (make openapi).
var update = flag.Bool("update", false, "rewrite api/openapi.json from the route table and the wire types")

// openapiFile is the API document as the repository carries it, for the SDKs' generators
// (sdk/typescript, sdk/python), which must build without Go or a daemon.
const openapiFile = "../../api/openapi.json"

// TestOpenAPIFile fails when api/openapi.json is not the document the daemon serves (but for its
// version): the API changed and `make openapi` was not run, so the SDKs would drift from it.
func TestOpenAPIFile(t *testing.T) {
	want, err := json.MarshalIndent(buildOpenAPI("dev"), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.WriteFile(openapiFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(openapiFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not the document the daemon serves: run `make openapi` and commit it", openapiFile)
	}
}
