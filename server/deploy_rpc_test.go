package server

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeployRPCManifest checks deploy/kubernetes/rpc.yaml: the workers'
// StatefulSet runs rpc-server on its declared port behind a headless
// Service, the server's --rpc names each of its pods at that port, and
// only the server's pods may reach the workers.
func TestDeployRPCManifest(t *testing.T) {
	find := func(kind, name string) k8sDoc {
		for _, d := range readManifests(t) {
			if d.str("kind") == kind && d.str("metadata.name") == name {
				return d
			}
		}
		t.Fatalf("no %s named %q", kind, name)
		return nil
	}
	sts := find("StatefulSet", "rpc-worker")
	podLabels := sts.obj("spec.template.metadata.labels")
	for k, v := range sts.obj("spec.selector.matchLabels") {
		assert.Equal(t, v, podLabels[k], "selector %s", k)
	}
	svc := find("Service", sts.str("spec.serviceName"))
	assert.Equal(t, "None", svc.str("spec.clusterIP"), "a headless Service gives the pods stable names")
	for k, v := range svc.obj("spec.selector") {
		assert.Equal(t, v, podLabels[k], "Service selector %s", k)
	}
	pod := sts.obj("spec.template.spec")
	requireOnly(t, "rpc-worker pod", pod, podSpecFields)
	c := k8sDoc(pod.list("containers")[0].(map[string]any))
	requireOnly(t, "rpc-worker container", c, containerFields)
	require.Equal(t, []any{"/opt/llama/lib/rpc-server"}, c.list("command"))
	var args []string
	for _, a := range c.list("args") {
		args = append(args, a.(string))
	}
	i := slices.Index(args, "-p")
	require.GreaterOrEqual(t, i, 0)
	port, err := strconv.Atoi(args[i+1])
	require.NoError(t, err)
	assert.Equal(t, port, k8sDoc(c.list("ports")[0].(map[string]any)).at("containerPort"))
	assert.Equal(t, port, k8sDoc(svc.list("spec.ports")[0].(map[string]any)).at("port"))
	assert.NotNil(t, c.obj("resources.requests"))

	srv := find("Deployment", "llama-server-rpc")
	sc := k8sDoc(srv.list("spec.template.spec.containers")[0].(map[string]any))
	var sargs []string
	for _, a := range sc.list("args") {
		sargs = append(sargs, a.(string))
	}
	j := slices.Index(sargs, "--rpc")
	require.GreaterOrEqual(t, j, 0, "the server needs --rpc")
	var want []string
	for n := range sts.at("spec.replicas").(int) {
		want = append(want, net.JoinHostPort(fmt.Sprintf("%s-%d.%s", sts.str("metadata.name"), n, svc.str("metadata.name")), strconv.Itoa(port)))
	}
	assert.Equal(t, want, strings.Split(sargs[j+1], ","), "--rpc names every worker pod")
	assert.Equal(t, "/health", sc.str("readinessProbe.httpGet.path"))

	np := find("NetworkPolicy", "rpc-worker-from-server")
	for k, v := range np.obj("spec.podSelector.matchLabels") {
		assert.Equal(t, v, podLabels[k], "the policy covers the workers")
	}
	from := k8sDoc(k8sDoc(np.list("spec.ingress")[0].(map[string]any)).list("from")[0].(map[string]any))
	srvLabels := srv.obj("spec.template.metadata.labels")
	for k, v := range from.obj("podSelector.matchLabels") {
		assert.Equal(t, v, srvLabels[k], "the policy admits the server")
	}
}
