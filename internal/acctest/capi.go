package acctest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"
	"sigs.k8s.io/yaml"
)

// The Cluster API core provider of the acceptance tests: the controller
// manager of module sigs.k8s.io/cluster-api, built from the module's source
// by tools/testcluster/capi.sh (keep ClusterAPIVersion equal to its
// CAPI_VERSION), and components YAML for `clusterctl init` assembled from the
// same module's config.
const (
	// ClusterAPIModule is the Go module the core provider is built from.
	ClusterAPIModule = "sigs.k8s.io/cluster-api"
	// ClusterAPIVersion is its version.
	ClusterAPIVersion = "v1.14.2"
	// ClusterAPIManagerImage is the manager's image, which capi.sh builds
	// and imports into a test cluster; it is never pulled.
	ClusterAPIManagerImage = "kubeplay.test/capi-manager:" + ClusterAPIVersion
	// ClusterAPINamespace is the core provider's namespace.
	ClusterAPINamespace = "capi-system"
	// ClusterAPIDeployment is the manager's Deployment, in ClusterAPINamespace.
	ClusterAPIDeployment = "capi-controller-manager"
	// ClusterAPIProviderLabel is the label clusterctl requires on every
	// object of a provider's components; the core provider's value is
	// "cluster-api".
	ClusterAPIProviderLabel = "cluster.x-k8s.io/provider"
	// ClusterAPIWebhookSecret holds the manager's webhook serving certificate.
	ClusterAPIWebhookSecret = "capi-webhook-service-cert"

	// clusterAPIWebhookCertDir is where the manager reads that certificate
	// (its --webhook-cert-dir).
	clusterAPIWebhookCertDir = "/tmp/k8s-webhook-server/serving-certs"
)

// ServiceHost returns the address of the API server of local test cluster 1
// or 2 that pods on that cluster's node use, and whether only pods in the
// host's network namespace (hostNetwork: true) reach it there. The test
// clusters have no kube-proxy, so the kubernetes Service's address
// (10.96.0.1) leads nowhere: a pod that talks to its API server gets this
// address as KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
//
//   - Cluster 1's API server listens on 127.0.0.1:16443 of the host only (its
//     certificate names 127.0.0.1, not the bridge's 10.250.0.1): a pod on
//     the pod network cannot reach it, a hostNetwork pod can.
//   - Cluster 2's listens on every address of its network namespace: its
//     pods reach it on their node's bridge, 10.251.0.1:16443.
func ServiceHost(cluster int) (host, port string, hostNetwork bool) {
	if cluster == 2 {
		return "10.251.0.1", "16443", false
	}
	return "127.0.0.1", "16443", true
}

// ClusterAPIVariables returns the clusterctl variables of
// ClusterAPICoreComponents for local test cluster 1 or 2: the API server
// address of ServiceHost (KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT)
// and whether the manager runs in the host's network namespace
// (CAPI_HOST_NETWORK).
func ClusterAPIVariables(cluster int) map[string]string {
	host, port, hostNetwork := ServiceHost(cluster)
	return map[string]string{
		"KUBERNETES_SERVICE_HOST": host,
		"KUBERNETES_SERVICE_PORT": port,
		"CAPI_HOST_NETWORK":       fmt.Sprint(hostNetwork),
	}
}

// capiBuild builds the manager's image once per test process; capiImport
// imports it into cluster 1 and 2, once each.
var (
	capiBuild  onceErr
	capiImport [3]onceErr
)

// onceErr runs a function once and keeps its error.
type onceErr struct {
	once sync.Once
	err  error
}

func (o *onceErr) do(f func() error) error {
	o.once.Do(func() { o.err = f() })
	return o.err
}

// ClusterAPIImage makes ClusterAPIManagerImage available on the node of
// local test cluster 1 or 2, starting that cluster if needed: the first
// call in the test process runs tools/testcluster/capi.sh build (the
// manager, built from module source, a few minutes on a cold Go build
// cache; a no-op once built), and the first for each cluster capi.sh import
// N. On failure t fails with the script's output. It skips t when the
// cluster is one of the user's own (KUBEPLAY_TEST_KUBECONFIG or
// KUBEPLAY_TEST_KUBECONFIG2): the image cannot be imported there.
func ClusterAPIImage(t testing.TB, cluster int) {
	t.Helper()
	switch cluster {
	case 1:
		Kubeconfig(t)
		if os.Getenv(EnvKubeconfig) != "" && !localCluster() {
			t.Skipf("%s names a cluster of your own: %s cannot be imported there", EnvKubeconfig, ClusterAPIManagerImage)
		}
	case 2:
		if p := os.Getenv(EnvKubeconfig2); p != "" && !localSecondCluster(p) {
			t.Skipf("%s names a cluster of your own: %s cannot be imported there", EnvKubeconfig2, ClusterAPIManagerImage)
		}
		SecondKubeconfig(t)
	default:
		t.Fatalf("ClusterAPIImage: cluster %d: want 1 or 2", cluster)
	}
	err := capiBuild.do(func() error {
		out, err := runCapiScript("build")
		if err == nil {
			t.Logf("capi.sh build: %s", lastLines(out, 2))
		}
		return err
	})
	if err != nil {
		t.Fatalf("building %s: %v", ClusterAPIManagerImage, err)
	}
	err = capiImport[cluster].do(func() error {
		out, err := runCapiScript("import", fmt.Sprint(cluster))
		if err == nil {
			t.Logf("capi.sh import %d: %s", cluster, lastLines(out, 1))
		}
		return err
	})
	if err != nil {
		t.Fatalf("importing %s into cluster %d: %v", ClusterAPIManagerImage, cluster, err)
	}
}

// localSecondCluster reports a kubeconfig path that is the local second
// cluster's own.
func localSecondCluster(path string) bool {
	root, err := RepoRoot()
	return err == nil && filepath.Clean(path) == filepath.Join(cacheDir(root), "testcluster", "kubeconfig2")
}

func runCapiScript(args ...string) (string, error) {
	_, out, err := runClusterScript("", append([]string{"capi.sh"}, args...)...)
	return out, err
}

// capiComponents is the components YAML, made once per test process.
var capiComponents struct {
	once       sync.Once
	components string
	metadata   string
	err        error
}

// ClusterAPICoreComponents returns a clusterctl components YAML of the core
// provider (provider "cluster-api", type CoreProvider) of ClusterAPIVersion,
// assembled from the module's source (located with go mod download -json):
//
//   - the Namespace capi-system;
//   - the CustomResourceDefinitions of core/config/crd/bases as they are,
//     without the conversion webhook the release's add (the API server
//     converts between versions by changing apiVersion alone);
//   - the ServiceAccount capi-manager, the ClusterRole of
//     core/config/rbac/role.yaml as capi-manager-role, and a binding of the
//     two;
//   - the Secret capi-webhook-service-cert (kubernetes.io/tls): a
//     self-signed ECDSA certificate for capi-webhook-service.capi-system.svc,
//     made once per test process. The manager's webhook server does not start
//     without serving certificates; a real installation gets them from
//     cert-manager's Certificate, whose controllers cannot be built here in
//     time (CertManagerAPI gives clusterctl the API it checks for, no more).
//     No webhook configuration refers to the server;
//   - the Deployment capi-controller-manager of image ClusterAPIManagerImage
//     (imagePullPolicy Never) with the arguments of the release's, but
//     --leader-elect=false, and the health address on the pod's IP.
//
// Every object carries the label cluster.x-k8s.io/provider: cluster-api. The
// Deployment has the clusterctl variables KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT (required) and CAPI_HOST_NETWORK (default false),
// and the release's own (all with defaults): see ClusterAPIVariables.
func ClusterAPICoreComponents(t testing.TB) string {
	t.Helper()
	loadClusterAPI(t)
	return capiComponents.components
}

// ClusterAPIMetadata returns the metadata.yaml of ClusterAPIVersion (the
// module's own), which a clusterctl repository serves beside the components.
func ClusterAPIMetadata(t testing.TB) string {
	t.Helper()
	loadClusterAPI(t)
	return capiComponents.metadata
}

func loadClusterAPI(t testing.TB) {
	t.Helper()
	c := &capiComponents
	c.once.Do(func() {
		var dir string
		if dir, c.err = moduleDir(ClusterAPIModule, ClusterAPIVersion); c.err != nil {
			return
		}
		var meta []byte
		if meta, c.err = os.ReadFile(filepath.Join(dir, "metadata.yaml")); c.err != nil {
			return
		}
		c.metadata = string(meta)
		c.components, c.err = coreComponents(dir)
	})
	if c.err != nil {
		t.Fatalf("Cluster API %s core components: %v", ClusterAPIVersion, c.err)
	}
}

// moduleDir returns the directory of module path@version in the module
// cache, downloading it if needed.
func moduleDir(path, version string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", path+"@"+version)
	// Outside the repository's module: its go.mod has nothing to say here.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &m); jerr != nil && err == nil {
		err = jerr
	}
	if err != nil || m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download -json %s@%s: %v %s %s", path, version, err, m.Error, stderr.String())
	}
	return m.Dir, nil
}

// coreComponents assembles the components YAML from the module in dir.
func coreComponents(dir string) (string, error) {
	config := filepath.Join(dir, "core", "config")
	var docs []string
	add := func(obj map[string]any) error {
		setProviderLabel(obj)
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		docs = append(docs, string(data))
		return nil
	}
	addText := func(text string) error {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(text), &obj); err != nil {
			return fmt.Errorf("%w in\n%s", err, text)
		}
		if providerLabel(obj) != "cluster-api" {
			return fmt.Errorf("no label %s: cluster-api in\n%s", ClusterAPIProviderLabel, text)
		}
		docs = append(docs, strings.TrimSpace(text)+"\n")
		return nil
	}

	if err := addText(capiNamespace); err != nil {
		return "", err
	}
	crds, err := filepath.Glob(filepath.Join(config, "crd", "bases", "*.yaml"))
	if err != nil {
		return "", err
	}
	if len(crds) == 0 {
		return "", fmt.Errorf("no CustomResourceDefinitions in %s", filepath.Join(config, "crd", "bases"))
	}
	sort.Strings(crds)
	for _, f := range crds {
		objs, err := readObjects(f)
		if err != nil {
			return "", err
		}
		for _, obj := range objs {
			if obj["kind"] != "CustomResourceDefinition" {
				return "", fmt.Errorf("%s: a %v, want CustomResourceDefinitions only", f, obj["kind"])
			}
			if err := add(obj); err != nil {
				return "", err
			}
		}
	}
	if err := addText(capiServiceAccount); err != nil {
		return "", err
	}
	role := filepath.Join(config, "rbac", "role.yaml")
	roles, err := readObjects(role)
	if err != nil {
		return "", err
	}
	if len(roles) != 1 || roles[0]["kind"] != "ClusterRole" {
		return "", fmt.Errorf("%s: want one ClusterRole, got %d objects", role, len(roles))
	}
	meta, ok := roles[0]["metadata"].(map[string]any)
	if !ok {
		return "", fmt.Errorf("%s: no metadata", role)
	}
	meta["name"] = "capi-manager-role"
	if err := add(roles[0]); err != nil {
		return "", err
	}
	if err := addText(capiRoleBinding); err != nil {
		return "", err
	}
	crt, key, err := selfSignedCert("capi-webhook-service.capi-system.svc", "capi-webhook-service.capi-system.svc.cluster.local")
	if err != nil {
		return "", err
	}
	b64 := base64.StdEncoding.EncodeToString
	if err := addText(fmt.Sprintf(capiWebhookSecret, ClusterAPIWebhookSecret, b64(crt), b64(crt), b64(key))); err != nil {
		return "", err
	}
	if err := addText(fmt.Sprintf(capiDeployment, ClusterAPIManagerImage, clusterAPIWebhookCertDir, clusterAPIWebhookCertDir, ClusterAPIWebhookSecret)); err != nil {
		return "", err
	}
	return strings.Join(docs, "---\n"), nil
}

// readObjects returns the objects of the YAML documents of file.
func readObjects(file string) ([]map[string]any, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return parseObjects(string(data))
}

// parseObjects decodes a multi-document YAML stream as clusterctl does.
func parseObjects(s string) ([]map[string]any, error) {
	objs, err := utilyaml.ToUnstructured([]byte(s))
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.Object)
	}
	return out, nil
}

func setProviderLabel(obj map[string]any) {
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	labels, _ := meta["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
		meta["labels"] = labels
	}
	labels[ClusterAPIProviderLabel] = "cluster-api"
}

func providerLabel(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	s, _ := labels[ClusterAPIProviderLabel].(string)
	return s
}

// selfSignedCert returns a PEM certificate for dnsNames, valid for a year
// and its own CA, and its PEM ECDSA P-256 key.
func selfSignedCert(dnsNames ...string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: dnsNames[0]},
		DNSNames:              dnsNames,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// substituteVariables fills the clusterctl variables of a components YAML,
// ${NAME} and ${NAME:=default}, from vars with clusterctl's own processor;
// a variable without a value or default is an error.
func substituteVariables(components string, vars map[string]string) (string, error) {
	out, err := yamlprocessor.NewSimpleProcessor().Process([]byte(components), func(name string) (string, error) {
		if v, ok := vars[name]; ok {
			return v, nil
		}
		return "", fmt.Errorf("no value for %s", name)
	})
	return string(out), err
}

// CertManagerAPI returns CustomResourceDefinitions of cert-manager.io/v1
// Issuer, ClusterIssuer, Certificate and CertificateRequest with schemas
// that accept any object: `clusterctl init` wants the cert-manager API (it
// creates a test Issuer and Certificate, and installs cert-manager from the
// network when that fails), not cert-manager's controllers, which
// ClusterAPICoreComponents does without.
func CertManagerAPI() string {
	var docs []string
	for _, r := range []struct{ kind, plural, scope, short string }{
		{"Issuer", "issuers", "Namespaced", ""},
		{"ClusterIssuer", "clusterissuers", "Cluster", ""},
		{"Certificate", "certificates", "Namespaced", "cert, certs"},
		{"CertificateRequest", "certificaterequests", "Namespaced", "cr, crs"},
	} {
		short := ""
		if r.short != "" {
			short = "\n    shortNames: [" + r.short + "]"
		}
		docs = append(docs, fmt.Sprintf(certManagerCRD, r.plural, r.kind, r.kind, r.plural, strings.ToLower(r.kind), short, r.scope))
	}
	return strings.Join(docs, "---\n")
}

const certManagerCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %s.cert-manager.io
  labels:
    app.kubernetes.io/name: cert-manager
    app.kubernetes.io/instance: kubeplay-test
spec:
  group: cert-manager.io
  names:
    kind: %s
    listKind: %sList
    plural: %s
    singular: %s
    categories: [cert-manager]%s
  scope: %s
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

const capiNamespace = `apiVersion: v1
kind: Namespace
metadata:
  name: capi-system
  labels:
    cluster.x-k8s.io/provider: cluster-api
    control-plane: controller-manager
`

const capiServiceAccount = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: capi-manager
  namespace: capi-system
  labels:
    cluster.x-k8s.io/provider: cluster-api
`

const capiRoleBinding = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: capi-manager-rolebinding
  labels:
    cluster.x-k8s.io/provider: cluster-api
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: capi-manager-role
subjects:
- kind: ServiceAccount
  name: capi-manager
  namespace: capi-system
`

// capiWebhookSecret: name, ca.crt, tls.crt, tls.key (base64).
const capiWebhookSecret = `apiVersion: v1
kind: Secret
metadata:
  name: %s
  namespace: capi-system
  labels:
    cluster.x-k8s.io/provider: cluster-api
type: kubernetes.io/tls
data:
  ca.crt: %s
  tls.crt: %s
  tls.key: %s
`

// capiDeployment: image, webhook cert dir (argument, mount), webhook Secret. As
// core/config/manager/manager.yaml with the release's patches (image, webhook
// port and certificate volume, provider label on selector and pods), except:
//   - --leader-elect=false: one replica, and no leader election Role;
//   - KUBERNETES_SERVICE_HOST/PORT: no kube-proxy (see ServiceHost);
//   - hostNetwork ${CAPI_HOST_NETWORK}: cluster 1's pods reach its API
//     server only from the host's network namespace;
//   - the health and diagnostics servers listen on the pod's IP, not on every
//     address (which, with hostNetwork, are the host's).
const capiDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: capi-controller-manager
  namespace: capi-system
  labels:
    cluster.x-k8s.io/provider: cluster-api
    control-plane: controller-manager
spec:
  replicas: 1
  selector:
    matchLabels:
      cluster.x-k8s.io/provider: cluster-api
      control-plane: controller-manager
  template:
    metadata:
      labels:
        cluster.x-k8s.io/provider: cluster-api
        control-plane: controller-manager
    spec:
      hostNetwork: ${CAPI_HOST_NETWORK:=false}
      containers:
      - name: manager
        image: %s
        imagePullPolicy: Never
        command:
        - /manager
        args:
        - --leader-elect=false
        - --diagnostics-address=${CAPI_DIAGNOSTICS_ADDRESS:=$(POD_IP):8443}
        - --insecure-diagnostics=${CAPI_INSECURE_DIAGNOSTICS:=false}
        - --health-addr=$(POD_IP):9440
        - --webhook-cert-dir=%s
        - --feature-gates=MachinePool=${EXP_MACHINE_POOL:=true},ClusterTopology=${CLUSTER_TOPOLOGY:=false},RuntimeSDK=${EXP_RUNTIME_SDK:=false},MachineSetPreflightChecks=${EXP_MACHINE_SET_PREFLIGHT_CHECKS:=true},MachineWaitForVolumeDetachConsiderVolumeAttachments=${EXP_MACHINE_WAITFORVOLUMEDETACH_CONSIDER_VOLUMEATTACHMENTS:=true},PriorityQueue=${EXP_PRIORITY_QUEUE:=true},ReconcilerRateLimiting=${EXP_RECONCILER_RATE_LIMITING:=true},InPlaceUpdates=${EXP_IN_PLACE_UPDATES:=false},MachineTaintPropagation=${EXP_MACHINE_TAINT_PROPAGATION:=false}
        env:
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: POD_UID
          valueFrom:
            fieldRef:
              fieldPath: metadata.uid
        - name: POD_IP
          valueFrom:
            fieldRef:
              fieldPath: status.podIP
        - name: KUBERNETES_SERVICE_HOST
          value: "${KUBERNETES_SERVICE_HOST}"
        - name: KUBERNETES_SERVICE_PORT
          value: "${KUBERNETES_SERVICE_PORT}"
        ports:
        - containerPort: 9443
          name: webhook-server
          protocol: TCP
        - containerPort: 9440
          name: healthz
          protocol: TCP
        - containerPort: 8443
          name: metrics
          protocol: TCP
        readinessProbe:
          httpGet:
            path: /readyz
            port: healthz
        livenessProbe:
          httpGet:
            path: /healthz
            port: healthz
        securityContext:
          allowPrivilegeEscalation: false
          capabilities:
            drop:
            - ALL
          privileged: false
          runAsUser: 65532
          runAsGroup: 65532
        terminationMessagePolicy: FallbackToLogsOnError
        # Not BestEffort: under make test-all's load those pods starve.
        resources: {requests: {cpu: 100m}}
        volumeMounts:
        - mountPath: %s
          name: cert
          readOnly: true
      securityContext:
        runAsNonRoot: true
        seccompProfile:
          type: RuntimeDefault
      serviceAccountName: capi-manager
      terminationGracePeriodSeconds: 10
      tolerations:
      - effect: NoSchedule
        key: node-role.kubernetes.io/master
      - effect: NoSchedule
        key: node-role.kubernetes.io/control-plane
      volumes:
      - name: cert
        secret:
          secretName: %s
`
