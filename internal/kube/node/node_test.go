package node

import (
	"strings"
	"testing"
)

func TestOptionsValidate(t *testing.T) {
	ok := Options{Kubeconfig: "k", Name: "n", Tenants: Tenants{Default: "t"}, KubeletListen: "127.0.0.1:10250", ClientCA: "ca.crt"}
	tests := []struct {
		name   string
		mutate func(*Options)
		want   string // in the error; "" for none
	}{
		{"valid", func(*Options) {}, ""},
		{"namespace tenants only", func(o *Options) { o.Tenants = Tenants{ByNamespace: map[string]string{"a": "b"}} }, ""},
		{"tenant label only", func(o *Options) { o.Tenants, o.TenantLabel = Tenants{}, true }, ""},
		{"no kubeconfig", func(o *Options) { o.Kubeconfig = "" }, "--kubeconfig"},
		{"no name", func(o *Options) { o.Name = "" }, "--node-name"},
		{"no tenant", func(o *Options) { o.Tenants = Tenants{} }, "--pod-tenant"},
		{"no client CA", func(o *Options) { o.ClientCA = "" }, "--kubelet-client-ca"},
		{"cert without key", func(o *Options) { o.TLSCert = "c" }, "--kubelet-tls-key"},
		{"listen without port", func(o *Options) { o.KubeletListen = "127.0.0.1" }, "--kubelet-listen"},
		{"listen on a name", func(o *Options) { o.KubeletListen = "localhost:10250" }, "IP address"},
		{"listen on any address", func(o *Options) { o.KubeletListen = "0.0.0.0:10250" }, "IP address"},
		{"port out of range", func(o *Options) { o.KubeletListen = "127.0.0.1:70000" }, "port"},
	}
	for _, tc := range tests {
		o := ok
		tc.mutate(&o)
		err := o.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}
