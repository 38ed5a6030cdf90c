package acctest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// parseDocs parses a multi-document YAML into objects, failing t on a
// document without apiVersion, kind or name.
func parseDocs(t *testing.T, s string) []map[string]any {
	t.Helper()
	objs, err := parseObjects(s)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func objName(obj map[string]any) string {
	name, _ := obj["metadata"].(map[string]any)["name"].(string)
	return name
}

// strictObject decodes the document of kind and name strictly into out.
func strictObject(t *testing.T, components, kind, name string, out any) {
	t.Helper()
	for _, obj := range parseDocs(t, components) {
		if obj["kind"] == kind && objName(obj) == name {
			data, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.UnmarshalStrict(data, out); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return
		}
	}
	t.Fatalf("no %s %s", kind, name)
}

func TestClusterAPICoreComponents(t *testing.T) {
	components := ClusterAPICoreComponents(t)
	objs := parseDocs(t, components)

	kinds := map[string]int{}
	for _, obj := range objs {
		kind, _ := obj["kind"].(string)
		kinds[kind]++
		if got := providerLabel(obj); got != "cluster-api" {
			t.Errorf("%s %s: label %s = %q, want cluster-api", kind, objName(obj), ClusterAPIProviderLabel, got)
		}
		ns, _ := obj["metadata"].(map[string]any)["namespace"].(string)
		if ns != "" && ns != ClusterAPINamespace {
			t.Errorf("%s %s in namespace %s, want %s", kind, objName(obj), ns, ClusterAPINamespace)
		}
		if kind == "CustomResourceDefinition" {
			if _, ok := obj["spec"].(map[string]any)["conversion"]; ok {
				t.Errorf("CustomResourceDefinition %s has a conversion section", objName(obj))
			}
		}
	}
	if objs[0]["kind"] != "Namespace" || objName(objs[0]) != ClusterAPINamespace {
		t.Errorf("first object: %s %s, want the Namespace %s", objs[0]["kind"], objName(objs[0]), ClusterAPINamespace)
	}
	dir, err := moduleDir(ClusterAPIModule, ClusterAPIVersion)
	if err != nil {
		t.Fatal(err)
	}
	bases, _ := filepath.Glob(filepath.Join(dir, "core", "config", "crd", "bases", "*.yaml"))
	want := map[string]int{"Namespace": 1, "CustomResourceDefinition": len(bases), "ServiceAccount": 1,
		"ClusterRole": 1, "ClusterRoleBinding": 1, "Secret": 1, "Deployment": 1}
	for kind, n := range want {
		if kinds[kind] != n {
			t.Errorf("%d objects of kind %s, want %d", kinds[kind], kind, n)
		}
	}
	if len(kinds) != len(want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}

	// The webhook certificate: for the service, and its key's.
	var secret corev1.Secret
	strictObject(t, components, "Secret", ClusterAPIWebhookSecret, &secret)
	if secret.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type %s, want %s", secret.Type, corev1.SecretTypeTLS)
	}
	if _, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"]); err != nil {
		t.Errorf("tls.crt and tls.key: %v", err)
	}
	block, _ := pem.Decode(secret.Data["tls.crt"])
	if block == nil {
		t.Fatal("tls.crt: no PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.VerifyHostname("capi-webhook-service.capi-system.svc"); err != nil {
		t.Error(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(secret.Data["ca.crt"])
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "capi-webhook-service.capi-system.svc"}); err != nil {
		t.Errorf("tls.crt against ca.crt: %v", err)
	}

	var role rbacv1.ClusterRole
	strictObject(t, components, "ClusterRole", "capi-manager-role", &role)
	if len(role.Rules) < 10 {
		t.Errorf("ClusterRole capi-manager-role has %d rules", len(role.Rules))
	}
	var binding rbacv1.ClusterRoleBinding
	strictObject(t, components, "ClusterRoleBinding", "capi-manager-rolebinding", &binding)
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 ||
		binding.Subjects[0].Name != "capi-manager" || binding.Subjects[0].Namespace != ClusterAPINamespace {
		t.Errorf("ClusterRoleBinding: %+v", binding)
	}

	if _, err := substituteVariables(components, nil); err == nil ||
		!strings.Contains(err.Error(), "KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT") {
		t.Errorf("substituteVariables without values: %v, want the two API server variables missing", err)
	}
	for cluster, want := range map[int]struct {
		host        string
		hostNetwork bool
	}{1: {"127.0.0.1", true}, 2: {"10.251.0.1", false}} {
		out, err := substituteVariables(components, ClusterAPIVariables(cluster))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "${") {
			t.Errorf("cluster %d: variables left after substitution", cluster)
		}
		var d appsv1.Deployment
		strictObject(t, out, "Deployment", ClusterAPIDeployment, &d)
		spec := d.Spec.Template.Spec
		if spec.HostNetwork != want.hostNetwork {
			t.Errorf("cluster %d: hostNetwork %v", cluster, spec.HostNetwork)
		}
		c := spec.Containers[0]
		if c.Image != ClusterAPIManagerImage || c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("cluster %d: image %s, pull policy %s", cluster, c.Image, c.ImagePullPolicy)
		}
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		if env["KUBERNETES_SERVICE_HOST"] != want.host || env["KUBERNETES_SERVICE_PORT"] != "16443" {
			t.Errorf("cluster %d: env %v", cluster, env)
		}
		for _, arg := range []string{"--leader-elect=false", "--webhook-cert-dir=" + clusterAPIWebhookCertDir,
			"--diagnostics-address=$(POD_IP):8443", "--health-addr=$(POD_IP):9440"} {
			if !slices.Contains(c.Args, arg) {
				t.Errorf("cluster %d: no argument %s in %q", cluster, arg, c.Args)
			}
		}
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != clusterAPIWebhookCertDir ||
			spec.Volumes[0].Secret == nil || spec.Volumes[0].Secret.SecretName != ClusterAPIWebhookSecret {
			t.Errorf("cluster %d: the certificate is not mounted at %s: %+v %+v", cluster, clusterAPIWebhookCertDir, c.VolumeMounts, spec.Volumes)
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.ReadinessProbe.HTTPGet.Port.StrVal != "healthz" {
			t.Errorf("cluster %d: readiness probe %+v", cluster, c.ReadinessProbe)
		}
		sel := d.Spec.Selector.MatchLabels
		if sel[ClusterAPIProviderLabel] != "cluster-api" || d.Spec.Template.Labels[ClusterAPIProviderLabel] != "cluster-api" {
			t.Errorf("cluster %d: selector %v, pod labels %v", cluster, sel, d.Spec.Template.Labels)
		}
	}
}

func TestClusterAPIMetadata(t *testing.T) {
	var meta struct {
		APIVersion    string
		Kind          string
		ReleaseSeries []struct {
			Major, Minor int
			Contract     string
		} `json:"releaseSeries"`
	}
	if err := yaml.UnmarshalStrict([]byte(ClusterAPIMetadata(t)), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Kind != "Metadata" || len(meta.ReleaseSeries) == 0 {
		t.Fatalf("metadata.yaml: %+v", meta)
	}
	s := meta.ReleaseSeries[0]
	if want := strings.Split(ClusterAPIVersion, "."); fmt.Sprintf("v%d", s.Major) != want[0] || fmt.Sprint(s.Minor) != want[1] {
		t.Errorf("metadata.yaml's first release series %d.%d, want that of %s", s.Major, s.Minor, ClusterAPIVersion)
	}
}

func TestCertManagerAPI(t *testing.T) {
	scopes := map[string]string{}
	for _, obj := range parseDocs(t, CertManagerAPI()) {
		var crd struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				Group, Scope string
				Names        struct{ Kind, Plural string }
				Versions     []struct {
					Name            string
					Served, Storage bool
					Subresources    struct{ Status *struct{} }
					Schema          struct {
						OpenAPIV3Schema struct {
							Type                  string
							PreserveUnknownFields bool `json:"x-kubernetes-preserve-unknown-fields"`
						} `json:"openAPIV3Schema"`
					}
				}
			}
		}
		doc, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(doc, &crd); err != nil {
			t.Fatal(err)
		}
		spec := crd.Spec
		if crd.Kind != "CustomResourceDefinition" || spec.Group != "cert-manager.io" || crd.Metadata.Name != spec.Names.Plural+".cert-manager.io" {
			t.Errorf("%s %s: group %s, names %+v", crd.Kind, crd.Metadata.Name, spec.Group, spec.Names)
		}
		if len(spec.Versions) != 1 {
			t.Fatalf("%s: %d versions", crd.Metadata.Name, len(spec.Versions))
		}
		v := spec.Versions[0]
		if v.Name != "v1" || !v.Served || !v.Storage || v.Subresources.Status == nil ||
			v.Schema.OpenAPIV3Schema.Type != "object" || !v.Schema.OpenAPIV3Schema.PreserveUnknownFields {
			t.Errorf("%s: version %+v", crd.Metadata.Name, v)
		}
		scopes[spec.Names.Kind] = spec.Scope
	}
	want := map[string]string{"Issuer": "Namespaced", "ClusterIssuer": "Cluster", "Certificate": "Namespaced", "CertificateRequest": "Namespaced"}
	if len(scopes) != len(want) {
		t.Errorf("kinds and scopes %v, want %v", scopes, want)
	}
	for k, s := range want {
		if scopes[k] != s {
			t.Errorf("%s: scope %q, want %s", k, scopes[k], s)
		}
	}
}

func TestSelfSignedCert(t *testing.T) {
	crt, key, err := selfSignedCert("a.example", "b.example")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(pair.Certificate[0])
	if !slices.Equal(cert.DNSNames, []string{"a.example", "b.example"}) || cert.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("certificate: %v %v", cert.DNSNames, cert.PublicKeyAlgorithm)
	}
}

// TestClusterAPIVersionAgrees: the release the harness builds and the tests
// install is the one of the clusterctl library the provider links.
func TestClusterAPIVersionAgrees(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "\t" + ClusterAPIModule + " " + ClusterAPIVersion + "\n"; !strings.Contains(string(gomod), want) {
		t.Errorf("go.mod does not require %s %s", ClusterAPIModule, ClusterAPIVersion)
	}
	script, err := os.ReadFile(filepath.Join(root, "tools", "testcluster", "capi.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "\nCAPI_VERSION=" + ClusterAPIVersion + "\n"; !strings.Contains(string(script), want) {
		t.Errorf("tools/testcluster/capi.sh does not build %s", ClusterAPIVersion)
	}
}
