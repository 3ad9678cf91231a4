package server

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv"
)

// k8sDoc is one YAML document of a manifest.
type k8sDoc map[string]any

// at walks a dotted path of map keys ("spec.template.spec").
func (d k8sDoc) at(path string) any {
	var v any = map[string]any(d)
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func (d k8sDoc) str(path string) string { s, _ := d.at(path).(string); return s }
func (d k8sDoc) obj(path string) k8sDoc { m, _ := d.at(path).(map[string]any); return m }
func (d k8sDoc) list(path string) []any { l, _ := d.at(path).([]any); return l }

// readManifests parses every document of deploy/kubernetes/*.yaml.
func readManifests(t *testing.T) []k8sDoc {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(t), "deploy", "kubernetes", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var docs []k8sDoc
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var v any // nested mappings decode as map[string]any
			err := dec.Decode(&v)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, f)
			if m, ok := v.(map[string]any); ok {
				docs = append(docs, m)
			}
		}
	}
	return docs
}

// k8sKinds are the kinds the manifests may use, with their API versions and
// the fields their spec may have (a structural check in the spirit of
// kubeconform, for the fields these manifests use).
var k8sKinds = map[string]struct {
	apiVersion string
	spec       []string
}{
	"Deployment":            {"apps/v1", []string{"replicas", "selector", "template", "strategy", "minReadySeconds", "revisionHistoryLimit", "progressDeadlineSeconds", "paused"}},
	"Service":               {"v1", []string{"selector", "ports", "type", "clusterIP", "sessionAffinity"}},
	"PersistentVolumeClaim": {"v1", []string{"accessModes", "resources", "storageClassName", "volumeMode", "volumeName"}},
	"ConfigMap":             {"v1", nil},
	"ServiceAccount":        {"v1", nil},
	"Role":                  {"rbac.authorization.k8s.io/v1", nil},
	"RoleBinding":           {"rbac.authorization.k8s.io/v1", nil},
	"HTTPRoute":             {"gateway.networking.k8s.io/v1", []string{"parentRefs", "hostnames", "rules"}},
	"InferencePool":         {"inference.networking.k8s.io/v1", []string{"selector", "targetPorts", "endpointPickerRef"}},
	"StatefulSet":           {"apps/v1", []string{"serviceName", "replicas", "podManagementPolicy", "selector", "template", "volumeClaimTemplates"}},
	"NetworkPolicy":         {"networking.k8s.io/v1", []string{"podSelector", "policyTypes", "ingress", "egress"}},
}

var podSpecFields = []string{"containers", "initContainers", "volumes", "serviceAccountName", "terminationGracePeriodSeconds", "nodeSelector", "tolerations", "affinity", "securityContext"}
var containerFields = []string{"name", "image", "imagePullPolicy", "command", "args", "env", "envFrom", "ports", "startupProbe", "readinessProbe", "livenessProbe", "resources", "volumeMounts", "securityContext"}

func requireOnly(t *testing.T, what string, m k8sDoc, allowed []string) {
	t.Helper()
	for k := range m {
		assert.Contains(t, allowed, k, "%s: unknown field %q", what, k)
	}
}

// TestDeployManifests checks deploy/kubernetes structurally and against the
// server: kinds and fields, selectors that select, ports that exist, probes
// on /health, the endpoint picker wired to the pool, and every metric the
// picker is told to read published by this server's /metrics.
func TestDeployManifests(t *testing.T) {
	docs := readManifests(t)
	byKind := map[string][]k8sDoc{}
	find := func(kind, name string) k8sDoc {
		for _, d := range byKind[kind] {
			if d.str("metadata.name") == name {
				return d
			}
		}
		t.Fatalf("no %s named %q", kind, name)
		return nil
	}
	for _, d := range docs {
		kind := d.str("kind")
		k, ok := k8sKinds[kind]
		require.True(t, ok, "unexpected kind %q", kind)
		assert.Equal(t, k.apiVersion, d.str("apiVersion"), kind)
		require.NotEmpty(t, d.str("metadata.name"), kind)
		if k.spec != nil {
			requireOnly(t, kind+".spec", d.obj("spec"), k.spec)
		}
		byKind[kind] = append(byKind[kind], d)
	}

	// Every Deployment: its selector selects its pods, its containers'
	// probes use declared ports, and resources are set.
	for _, dep := range byKind["Deployment"] {
		name := dep.str("metadata.name")
		podLabels := dep.obj("spec.template.metadata.labels")
		for k, v := range dep.obj("spec.selector.matchLabels") {
			assert.Equal(t, v, podLabels[k], "%s: selector %s", name, k)
		}
		pod := dep.obj("spec.template.spec")
		requireOnly(t, name+" pod", pod, podSpecFields)
		for _, c := range pod.list("containers") {
			c := k8sDoc(c.(map[string]any))
			requireOnly(t, name+" container", c, containerFields)
			require.NotEmpty(t, c.str("image"))
			ports := map[string]int{}
			for _, p := range c.list("ports") {
				p := k8sDoc(p.(map[string]any))
				ports[p.str("name")] = p.at("containerPort").(int)
			}
			for _, probe := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
				if hp := c.obj(probe + ".httpGet"); hp != nil {
					_, ok := ports[hp.str("port")]
					assert.True(t, ok, "%s %s: port %v not declared", name, probe, hp.at("port"))
				}
			}
			assert.NotNil(t, c.obj("resources.requests"), "%s: resource requests", name)
		}
	}

	// The model server: readiness follows /health on its port, /metrics on.
	srv := find("Deployment", "llama-server")
	c := k8sDoc(srv.list("spec.template.spec.containers")[0].(map[string]any))
	args := make([]string, 0)
	for _, a := range c.list("args") {
		args = append(args, a.(string))
	}
	argValue := func(flag string) string {
		i := slices.Index(args, flag)
		require.GreaterOrEqual(t, i, 0, "llama-server needs %s", flag)
		require.Less(t, i+1, len(args))
		return args[i+1]
	}
	assert.Contains(t, args, "--metrics", "the endpoint picker scrapes /metrics")
	assert.Equal(t, "0.0.0.0", argValue("--host"))
	port := argValue("--port")
	assert.Equal(t, port, "8080")
	for _, probe := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
		assert.Equal(t, "/health", c.str(probe+".httpGet.path"), probe)
	}
	podLabels := srv.obj("spec.template.metadata.labels")

	svc := find("Service", "llama-server")
	for k, v := range svc.obj("spec.selector") {
		assert.Equal(t, v, podLabels[k], "Service selector %s", k)
	}

	// The pool selects the model server's pods on its port, and its
	// endpoint picker is a Service of a Deployment told about this pool.
	pool := find("InferencePool", "llama-server")
	for k, v := range pool.obj("spec.selector.matchLabels") {
		assert.Equal(t, v, podLabels[k], "InferencePool selector %s", k)
	}
	tp := pool.list("spec.targetPorts")
	require.Len(t, tp, 1)
	assert.Equal(t, 8080, k8sDoc(tp[0].(map[string]any)).at("number"))
	eppSvc := find("Service", pool.str("spec.endpointPickerRef.name"))
	eppPort := pool.obj("spec.endpointPickerRef.port").at("number")
	assert.Contains(t, []any{eppSvc.list("spec.ports")[0].(map[string]any)["port"]}, eppPort)
	epp := find("Deployment", "llama-server-epp")
	for k, v := range eppSvc.obj("spec.selector") {
		assert.Equal(t, v, epp.obj("spec.template.metadata.labels")[k], "EPP Service selector %s", k)
	}
	ec := k8sDoc(epp.list("spec.template.spec.containers")[0].(map[string]any))
	var eppArgs []string
	for _, a := range ec.list("args") {
		eppArgs = append(eppArgs, a.(string))
	}
	flagOf := func(flag string) string {
		i := slices.Index(eppArgs, flag)
		require.GreaterOrEqual(t, i, 0, "EPP needs %s", flag)
		return eppArgs[i+1]
	}
	assert.Equal(t, pool.str("metadata.name"), flagOf("--pool-name"))
	assert.Equal(t, "9002", flagOf("--grpc-port"))

	// Its config file comes from the ConfigMap and is a valid picker config
	// whose profiles use declared plugins.
	cfgPath := flagOf("--config-file")
	var cmName string
	for _, v := range epp.list("spec.template.spec.volumes") {
		v := k8sDoc(v.(map[string]any))
		cmName = v.str("configMap.name")
	}
	cm := find("ConfigMap", cmName)
	cfgText, _ := cm.obj("data")[filepath.Base(cfgPath)].(string)
	require.NotEmpty(t, cfgText, "ConfigMap %s has no %s", cmName, filepath.Base(cfgPath))
	var cfgAny any
	require.NoError(t, yaml.Unmarshal([]byte(cfgText), &cfgAny))
	cfg := k8sDoc(cfgAny.(map[string]any))
	assert.Equal(t, "EndpointPickerConfig", cfg.str("kind"))
	var plugins []string
	for _, p := range cfg.list("plugins") {
		plugins = append(plugins, k8sDoc(p.(map[string]any)).str("type"))
	}
	for _, prof := range cfg.list("schedulingProfiles") {
		for _, p := range k8sDoc(prof.(map[string]any)).list("plugins") {
			assert.Contains(t, plugins, k8sDoc(p.(map[string]any)).str("pluginRef"))
		}
	}

	// Every metric the picker reads is a gauge of our /metrics.
	text := metricsText(engine.Metrics{KVCacheCapacity: 4096, MaxAdapters: 1, RunningAdapters: []string{"a"}, AdaptersChanged: time.Now()}, engine.Metrics{})
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err)
	for i, a := range eppArgs {
		if strings.HasSuffix(a, "-metric") {
			f, ok := fams[eppArgs[i+1]]
			if assert.True(t, ok, "%s %s is not in /metrics", a, eppArgs[i+1]) {
				assert.Equal(t, dto.MetricType_GAUGE, f.GetType(), eppArgs[i+1])
			}
		}
	}
	assert.InDelta(t, float64(time.Now().Unix()), fams["vllm:lora_requests_info"].GetMetric()[0].GetGauge().GetValue(), 60)

	// The route sends the gateway's traffic to the pool.
	route := byKind["HTTPRoute"][0]
	br := k8sDoc(k8sDoc(route.list("spec.rules")[0].(map[string]any)).list("backendRefs")[0].(map[string]any))
	assert.Equal(t, "InferencePool", br.str("kind"))
	assert.Equal(t, pool.str("metadata.name"), br.str("name"))
}
