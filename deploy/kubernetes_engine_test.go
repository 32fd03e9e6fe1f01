package deploy

import (
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.yaml.in/yaml/v3"

	"github.com/collab/collab/internal/testkit/natstest"
)

// k8sObject is the part of a manifest the engine's checks read.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Replicas        int    `yaml:"replicas"`
		ServiceName     string `yaml:"serviceName"`
		ClusterIP       string `yaml:"clusterIP"`
		PublishNotReady bool   `yaml:"publishNotReadyAddresses"`
		// Selector is a Service's labels, or a workload's {matchLabels: labels}.
		Selector map[string]any `yaml:"selector"`
		Ports    []k8sPort      `yaml:"ports"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec k8sPodSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sPort struct {
	Name       string `yaml:"name"`
	Port       int    `yaml:"port"`
	TargetPort string `yaml:"targetPort"`
}

type k8sPodSpec struct {
	AutomountServiceAccountToken *bool `yaml:"automountServiceAccountToken"`
	EnableServiceLinks           *bool `yaml:"enableServiceLinks"`
	SecurityContext              struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
		RunAsUser    int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Containers []struct {
		Image   string   `yaml:"image"`
		Command []string `yaml:"command"`
		Env     []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom struct {
				SecretKeyRef struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"secretKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		EnvFrom []struct {
			ConfigMapRef struct {
				Name string `yaml:"name"`
			} `yaml:"configMapRef"`
			SecretRef struct {
				Name string `yaml:"name"`
			} `yaml:"secretRef"`
		} `yaml:"envFrom"`
		Ports        []k8sContainerPort `yaml:"ports"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
		ReadinessProbe k8sProbe `yaml:"readinessProbe"`
		LivenessProbe  k8sProbe `yaml:"livenessProbe"`
		Resources      struct {
			Limits map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext struct {
			ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
	} `yaml:"containers"`
	Volumes []struct {
		Name      string `yaml:"name"`
		ConfigMap struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type k8sContainerPort struct {
	Name          string `yaml:"name"`
	ContainerPort int    `yaml:"containerPort"`
}

type k8sProbe struct {
	Exec struct {
		Command []string `yaml:"command"`
	} `yaml:"exec"`
}

// readManifests decodes every document of a multi-document manifest file.
func readManifests(t *testing.T, file string) []k8sObject {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []k8sObject
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var o k8sObject
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, o)
	}
	return out
}

// selects reports whether a Service's selector picks pods with these labels.
func selects(selector map[string]any, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// kubernetesEngine is the engine of the Kubernetes manifests: its StatefulSet, the Services that
// select its pods, and its configuration file.
type kubernetesEngine struct {
	set             k8sObject
	client, routes  k8sObject
	conf, confMount string
}

func readKubernetesEngine(t *testing.T) kubernetesEngine {
	t.Helper()
	const file = "kubernetes/nats.yaml"
	var root kustomization
	readYAML(t, "kubernetes/kustomization.yaml", &root)
	if !slices.Contains(root.Resources, path.Base(file)) {
		t.Fatalf("kustomization.yaml does not list %s: no wake-up engine", path.Base(file))
	}
	var e kubernetesEngine
	configMaps := map[string]k8sObject{}
	var services []k8sObject
	for _, o := range readManifests(t, file) {
		if o.Metadata.Namespace != "collab" || o.Metadata.Labels["app.kubernetes.io/part-of"] != "collab" {
			t.Errorf("%s %s: namespace %q, labels %v", o.Kind, o.Metadata.Name, o.Metadata.Namespace, o.Metadata.Labels)
		}
		switch o.Kind {
		case "StatefulSet":
			e.set = o
		case "ConfigMap":
			configMaps[o.Metadata.Name] = o
		case "Service":
			services = append(services, o)
		}
	}
	pod := e.set.Spec.Template.Spec
	if len(pod.Containers) != 1 || e.set.Spec.Replicas < 3 {
		t.Fatalf("%s: no StatefulSet of one container and three replicas or more", file)
	}
	for _, s := range services {
		switch {
		case !selects(s.Spec.Selector, e.set.Spec.Template.Metadata.Labels):
			t.Errorf("Service %s selects no engine pod", s.Metadata.Name)
		case s.Spec.ClusterIP == "None":
			e.routes = s
		default:
			e.client = s
		}
	}
	if e.client.Metadata.Name == "" {
		t.Fatalf("%s: no client Service of the engine's pods", file)
	}
	if e.routes.Metadata.Name == "" || e.routes.Metadata.Name != e.set.Spec.ServiceName || !e.routes.Spec.PublishNotReady {
		t.Errorf("the StatefulSet's serviceName %q is not a headless Service of its pods that publishes them before they are ready", e.set.Spec.ServiceName)
	}
	e.conf = configArg(pod.Containers[0].Command)
	for _, m := range pod.Containers[0].VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && m.MountPath == path.Dir(e.conf) {
				e.confMount = configMaps[v.ConfigMap.Name].Data[path.Base(e.conf)]
			}
		}
	}
	if e.confMount == "" {
		t.Fatalf("%s: the command %v names no file of a mounted ConfigMap", file, pod.Containers[0].Command)
	}
	return e
}

// The Kubernetes manifests run the wake-up engine: a NATS cluster of three that requires the
// token of collab-secrets of its clients and of its routes, and every service pod names its
// client Service in COLLAB_WAKEUP_URL and holds the token.
func TestKubernetesRunsTheEngine(t *testing.T) {
	e := readKubernetesEngine(t)
	pod := e.set.Spec.Template.Spec
	c := pod.Containers[0]
	checkEngineImage(t, "nats.yaml", c.Image)
	if !pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.RunAsUser == 0 || !c.SecurityContext.ReadOnlyRootFilesystem ||
		c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation ||
		!slices.Equal(c.SecurityContext.Capabilities.Drop, []string{"ALL"}) || c.Resources.Limits["memory"] == "" ||
		pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken || pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Errorf("nats.yaml: the pods are not held as collab's (restricted Pod Security, limits, no service account token or links): %+v", pod)
	}
	var tokenFromSecret bool
	for _, env := range c.Env {
		ref := env.ValueFrom.SecretKeyRef
		tokenFromSecret = tokenFromSecret || env.Name == "COLLAB_WAKEUP_TOKEN" && ref.Name == "collab-secrets" && ref.Key == "COLLAB_WAKEUP_TOKEN"
	}
	if !tokenFromSecret || len(c.EnvFrom) > 0 {
		t.Error("nats.yaml: the servers do not read COLLAB_WAKEUP_TOKEN (alone) from collab-secrets")
	}
	var secret struct {
		StringData map[string]string `yaml:"stringData"`
	}
	readYAML(t, "kubernetes/secret.example.yaml", &secret)
	if _, ok := secret.StringData["COLLAB_WAKEUP_TOKEN"]; !ok {
		t.Error("secret.example.yaml has no COLLAB_WAKEUP_TOKEN")
	}

	o := natstest.ConfigFile(t, writeTemp(t, e.confMount), podEnv(e, 0))
	if o.Authorization != engineToken || o.Cluster.Username == "" || o.Cluster.Password != engineToken {
		t.Errorf("the engine's configuration does not require the token of its clients and routes: %q, %q/%q", o.Authorization, o.Cluster.Username, o.Cluster.Password)
	}
	checkMonitoring(t, "nats.yaml readinessProbe", c.ReadinessProbe.Exec.Command, o)
	checkMonitoring(t, "nats.yaml livenessProbe", c.LivenessProbe.Exec.Command, o)
	// Routes to every pod of the StatefulSet, through its headless Service, with credentials.
	var routes []string
	for _, r := range o.Routes {
		pass, _ := r.User.Password()
		if r.User.Username() != o.Cluster.Username || pass != engineToken {
			t.Errorf("route to %s without the cluster's credentials", r.Host)
		}
		routes = append(routes, r.Host)
	}
	var want []string
	for i := range e.set.Spec.Replicas {
		want = append(want, fmt.Sprintf("%s-%d.%s.collab.svc.cluster.local:%d", e.set.Metadata.Name, i, e.routes.Metadata.Name, o.Cluster.Port))
	}
	if !slices.Equal(routes, want) {
		t.Errorf("routes %v, want every pod of the StatefulSet: %v", routes, want)
	}
	// The Services reach the ports the servers listen on.
	for _, svc := range []struct {
		k8sObject
		port int
	}{{e.client, o.Port}, {e.routes, o.Cluster.Port}} {
		if p := svc.Spec.Ports; len(p) != 1 || p[0].Port != svc.port || containerPort(c.Ports, p[0].TargetPort) != svc.port {
			t.Errorf("Service %s: ports %+v, want %d, the container's port of that number", svc.Metadata.Name, p, svc.port)
		}
	}

	// Every service pod (the base every overlay stamps out) reads collab-config and
	// collab-secrets, so holds the engine's address and token.
	var config struct {
		Data map[string]string `yaml:"data"`
	}
	readYAML(t, "kubernetes/config.yaml", &config)
	if want := fmt.Sprintf("nats://%s.collab.svc.cluster.local:%d", e.client.Metadata.Name, o.Port); config.Data["COLLAB_WAKEUP_URL"] != want {
		t.Errorf("config.yaml COLLAB_WAKEUP_URL = %q, want the engine's client Service, %s", config.Data["COLLAB_WAKEUP_URL"], want)
	}
	base := readManifests(t, "kubernetes/service-base/service.yaml")[0].Spec.Template.Spec.Containers[0]
	var fromConfig, fromSecret bool
	for _, ef := range base.EnvFrom {
		fromConfig = fromConfig || ef.ConfigMapRef.Name == "collab-config"
		fromSecret = fromSecret || ef.SecretRef.Name == "collab-secrets"
	}
	for _, env := range base.Env {
		if strings.HasPrefix(env.Name, "COLLAB_WAKEUP_") {
			t.Errorf("service-base overrides %s", env.Name)
		}
	}
	if !fromConfig || !fromSecret {
		t.Error("the service pods do not read collab-config and collab-secrets: no engine address or token")
	}
}

// containerPort is the number of a container's named port.
func containerPort(ports []k8sContainerPort, name string) int {
	for _, p := range ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// podEnv is the environment of the engine's pod i: the StatefulSet's env, with Kubernetes'
// $(VAR) references put in and the test's token for the Secret's.
func podEnv(e kubernetesEngine, i int) map[string]string {
	env := map[string]string{}
	for _, v := range e.set.Spec.Template.Spec.Containers[0].Env {
		switch {
		case v.ValueFrom.SecretKeyRef.Key != "":
			env[v.Name] = engineToken
		case v.Name == "POD_NAME":
			env[v.Name] = fmt.Sprintf("%s-%d", e.set.Metadata.Name, i)
		default:
			env[v.Name] = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(v.Value, func(ref string) string {
				return env[ref[2:len(ref)-1]]
			})
		}
	}
	return env
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "nats-server.conf")
	if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// The Kubernetes engine's configuration, run as its StatefulSet would run it (each pod's
// environment, the pods' DNS names mapped to loopback ports): the servers form one cluster, a
// wake-up published on one reaches a subscriber of another, and neither a client nor a route
// without the token gets in.
func TestKubernetesEngineFormsACluster(t *testing.T) {
	t.Parallel()
	e := readKubernetesEngine(t)
	n := e.set.Spec.Replicas
	conf := writeTemp(t, e.confMount)
	clusterPorts := make([]int, n)
	for i := range clusterPorts {
		clusterPorts[i] = freePort(t)
	}
	servers := make([]*server.Server, n)
	for i := range servers {
		o := natstest.ConfigFile(t, conf, podEnv(e, i))
		o.Host, o.Port, o.HTTPPort = "127.0.0.1", -1, -1
		o.Cluster.Host, o.Cluster.Port = "127.0.0.1", clusterPorts[i]
		for _, r := range o.Routes {
			pod, _, _ := strings.Cut(r.Hostname(), ".")
			j, err := strconv.Atoi(strings.TrimPrefix(pod, e.set.Metadata.Name+"-"))
			if err != nil || j < 0 || j >= n {
				t.Fatalf("route to %s: no pod of the StatefulSet", r.Host)
			}
			r.Host = fmt.Sprintf("127.0.0.1:%d", clusterPorts[j])
		}
		servers[i] = natstest.Start(t, o)
	}
	// Each server routes to every other pod, which it knows by its name (server_name).
	deadline := time.Now().Add(10 * time.Second)
	for i, s := range servers {
		var want []string
		for j := range n {
			if j != i {
				want = append(want, fmt.Sprintf("%s-%d", e.set.Metadata.Name, j))
			}
		}
		for !slices.Equal(peers(t, s), want) {
			if time.Now().After(deadline) {
				t.Fatalf("the cluster did not form: %s routes to %v, want %v", s.Name(), peers(t, s), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	sub, err := nats.Connect(servers[0].ClientURL(), nats.Token(engineToken))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	got := make(chan *nats.Msg, 1)
	if _, err := sub.ChanSubscribe("collab.test", got); err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	pub, err := nats.Connect(servers[n-1].ClientURL(), nats.Token(engineToken))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	// The subscription reaches the other servers over the routes a moment after the flush.
	deadline = time.Now().Add(10 * time.Second)
	for delivered := false; !delivered; {
		if err := pub.Publish("collab.test", []byte("wake")); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
			delivered = true
		case <-time.After(50 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("a wake-up published on one server never reached a subscriber of another")
			}
		}
	}

	if nc, err := nats.Connect(servers[0].ClientURL(), nats.Token("not-the-token")); err == nil {
		nc.Close()
		t.Error("a client with another token got in")
	}
	// A server that routes to the cluster without the credentials stays outside.
	intruder := natstest.Start(t, &server.Options{Host: "127.0.0.1", Port: -1,
		Cluster: server.ClusterOpts{Name: "collab", Host: "127.0.0.1", Port: -1},
		Routes:  server.RoutesFromStr(fmt.Sprintf("nats-route://127.0.0.1:%d", clusterPorts[0]))})
	time.Sleep(500 * time.Millisecond)
	if intruder.NumRoutes() != 0 || len(peers(t, servers[0])) != n-1 {
		t.Errorf("a route without credentials got in: the intruder has %d routes, the server routes to %v", intruder.NumRoutes(), peers(t, servers[0]))
	}
}

// peers are the names of the servers s routes to, sorted (a server keeps several route
// connections to each).
func peers(t *testing.T, s *server.Server) []string {
	t.Helper()
	rz, err := s.Routez(nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rz.Routes {
		if !slices.Contains(out, r.RemoteName) {
			out = append(out, r.RemoteName)
		}
	}
	slices.Sort(out)
	return out
}

// freePort is a loopback port no one listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}
