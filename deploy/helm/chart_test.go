package helm

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/yaml"

	"github.com/zksched/zksched/internal/testenv"
)

const (
	chartDir    = "zksched"
	releaseName = "zksched"
	namespace   = "sched"
	// fullname is the prefix of the objects' names: the release name holds the chart's.
	fullname = "zksched"
	// graceMargin is values.yaml's worker.terminationGraceMarginSeconds.
	graceMargin = 15 * time.Second
)

// variant is a set of values the chart is rendered with, and what the rendering must show.
type variant struct {
	name string
	// valuesFile is a values file under deploy/helm; "" renders the chart's defaults.
	valuesFile string
	// existing are the user's Secrets the values name: name, key, value.
	existing map[string]map[string]string
	masters  int
	hardAnti bool
	// serviceMonitor and zkAuth say whether a ServiceMonitor and the ZooKeeper credential
	// are rendered; pools are the worker pools with their replicas.
	serviceMonitor, zkAuth bool
	pools                  map[string]int32
}

// variants: the defaults, what `helm install` with nothing gives; production, the paths of
// the user's own Secrets, the ServiceMonitor, three masters that require nodes of their own
// and keys merged into the config; pools, what is off by default turned off (ZooKeeper's
// ACL, so no credential mounted) and worker pools that replace the default one, one with a
// ten-minute drain.
var variants = []variant{
	{name: "default", masters: 2, zkAuth: true, pools: map[string]int32{"default": 2}},
	{name: "production", valuesFile: "examples/production.yaml", masters: 3, hardAnti: true, serviceMonitor: true, zkAuth: true,
		pools: map[string]int32{"default": 2},
		existing: map[string]map[string]string{
			"zksched-zookeeper": {"zk-auth": "zksched:a-zookeeper-password"},
			"zksched-db":        {"dsn": "postgres://zksched:pw@pg.prod.svc:5432/zksched?sslmode=verify-full"},
			"zksched-api":       {"api-token": "an-admin-token-of-production"},
		}},
	{name: "pools", valuesFile: "examples/pools.yaml", masters: 2, pools: map[string]int32{"general": 4, "gpu": 1}},
}

func (v variant) values(t *testing.T) map[string]any {
	t.Helper()
	if v.valuesFile == "" {
		return map[string]any{}
	}
	vals, err := chartutil.ReadValuesFile(v.valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	return vals.AsMap()
}

func TestChartLint(t *testing.T) {
	t.Parallel()
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			lintChart(t, v.values(t))
		})
	}
}

// lintChart runs `helm lint` on the chart with vals: no message may be a warning or worse.
func lintChart(t *testing.T, vals map[string]any) {
	t.Helper()
	linter := lint.AllWithKubeVersion(chartDir, vals, namespace, kubeVersion())
	for _, m := range linter.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
}

// kubeVersion is the Kubernetes version the chart is linted and rendered for: the one of the
// k8s.io/api go.mod requires (v0.37.2 is Kubernetes v1.37.2), whose types the objects are decoded
// into. The Helm library's own default is far older.
var kubeVersion = sync.OnceValue(func() *chartutil.KubeVersion {
	gomod, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "go.mod"))
	if err != nil {
		panic(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/api v0\.(\S+)`).FindSubmatch(gomod)
	if m == nil {
		panic("go.mod requires no k8s.io/api")
	}
	v, err := chartutil.ParseKubeVersion("v1." + string(m[1]))
	if err != nil {
		panic(err)
	}
	return v
})

// object is one rendered object, decoded.
type object struct {
	kind, name string
	// obj is the Kubernetes API type; *serviceMonitor for a ServiceMonitor.
	obj  any
	hook bool
}

// rendered is what `helm template` gives.
type rendered struct{ objects []object }

// get returns the object of kind and name, failing the test without one.
func (r rendered) get(t *testing.T, kind, name string) any {
	t.Helper()
	for _, o := range r.objects {
		if o.kind == kind && o.name == name {
			return o.obj
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func (r rendered) all(kind string) []object {
	var out []object
	for _, o := range r.objects {
		if o.kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// renderChart renders the chart as `helm template` does, through the Helm library in
// client-only mode, and decodes every object strictly.
func renderChart(t *testing.T, vals map[string]any) rendered {
	t.Helper()
	manifest, hooks := renderManifests(t, vals)
	var r rendered
	for _, doc := range splitManifest(manifest) {
		r.objects = append(r.objects, decodeObject(t, doc, false))
	}
	for _, doc := range hooks {
		r.objects = append(r.objects, decodeObject(t, doc, true))
	}
	return r
}

// renderManifests returns the release's manifest and its hooks' manifests.
func renderManifests(t *testing.T, vals map[string]any) (string, []string) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{Log: t.Logf})
	install.DryRun, install.DryRunOption, install.ClientOnly, install.Replace = true, "client", true, true
	install.ReleaseName, install.Namespace = releaseName, namespace
	install.KubeVersion = kubeVersion()
	rel, err := install.Run(ch, vals)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	var hooks []string
	for _, h := range rel.Hooks {
		hooks = append(hooks, h.Manifest)
	}
	return rel.Manifest, hooks
}

// splitManifest splits a manifest into its documents, dropping those that hold only comments.
func splitManifest(manifest string) []string {
	var docs []string
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(manifest, -1) {
		for _, line := range strings.Split(doc, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				docs = append(docs, doc)
				break
			}
		}
	}
	return docs
}

// scheme knows the Kubernetes API types the chart renders, of the k8s.io/api version go.mod
// pins; strictCodecs decode into them refusing unknown and duplicate fields.
var (
	scheme       = newScheme()
	strictCodecs = serializer.NewCodecFactory(scheme, serializer.EnableStrict)
)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// serviceMonitor is the part of the Prometheus operator's ServiceMonitor
// (monitoring.coreos.com/v1) the chart writes, its fields named as the CRD names them: a
// field the chart renders that is not here fails the strict decoding.
type serviceMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// decodeObject decodes one rendered document strictly: into its type of k8s.io/api, or for a
// ServiceMonitor into serviceMonitor. An object of any other type fails the test.
func decodeObject(t *testing.T, doc string, hook bool) object {
	t.Helper()
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
		t.Fatalf("%v in\n%s", err, doc)
	}
	if tm.APIVersion == "monitoring.coreos.com/v1" && tm.Kind == "ServiceMonitor" {
		var sm serviceMonitor
		if err := yaml.UnmarshalStrict([]byte(doc), &sm); err != nil {
			t.Fatalf("ServiceMonitor: %v in\n%s", err, doc)
		}
		return object{kind: tm.Kind, name: sm.Metadata.Name, obj: &sm, hook: hook}
	}
	obj, gvk, err := strictCodecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
	if err != nil {
		t.Fatalf("decode %s strictly: %v in\n%s", tm.Kind, err, doc)
	}
	m, err := metaOf(obj)
	if err != nil {
		t.Fatal(err)
	}
	return object{kind: gvk.Kind, name: m.GetName(), obj: obj, hook: hook}
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	return m, nil
}

// TestChartStrictDecoding: the strict decoding refuses a field the API type lacks, so the
// decoding of the rendered objects proves theirs are all known.
func TestChartStrictDecoding(t *testing.T) {
	t.Parallel()
	doc := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replicas: 1\n  replicaz: 2\n"
	if _, _, err := strictCodecs.UniversalDeserializer().Decode([]byte(doc), nil, nil); err == nil || !strings.Contains(err.Error(), "replicaz") {
		t.Errorf("decoding a Deployment with spec.replicaz: err %v, want an unknown field error naming it", err)
	}
	sm := "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: x\nspec:\n  endpoints:\n  - port: m\n    intervall: 1m\n"
	if err := yaml.UnmarshalStrict([]byte(sm), new(serviceMonitor)); err == nil || !strings.Contains(err.Error(), "intervall") {
		t.Errorf("decoding a ServiceMonitor with intervall: err %v, want an unknown field error naming it", err)
	}
}

func TestChartTemplate(t *testing.T) {
	t.Parallel()
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			r := renderChart(t, v.values(t))
			checkMasters(t, v, r)
			checkWorkers(t, v, r)
			checkSecretRefs(t, v, r)
			checkMigrate(t, v, r)
			checkMetrics(t, v, r)
		})
	}
}

func selects(t *testing.T, sel *metav1.LabelSelector, set map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(set))
}

func deployment(t *testing.T, r rendered, name string) *appsv1.Deployment {
	t.Helper()
	return r.get(t, "Deployment", name).(*appsv1.Deployment)
}

func workerDeployments(r rendered) map[string]*appsv1.Deployment {
	out := map[string]*appsv1.Deployment{}
	for _, o := range r.all("Deployment") {
		if pool, ok := strings.CutPrefix(o.name, fullname+"-worker-"); ok {
			out[pool] = o.obj.(*appsv1.Deployment)
		}
	}
	return out
}

func checkMasters(t *testing.T, v variant, r rendered) {
	masters := deployment(t, r, fullname+"-master")
	if got := *masters.Spec.Replicas; got != int32(v.masters) {
		t.Errorf("masters: %d replicas, want %d", got, v.masters)
	}
	podLabels := masters.Spec.Template.Labels
	if !selects(t, masters.Spec.Selector, podLabels) {
		t.Errorf("the masters' Deployment does not select its pods")
	}
	anti := masters.Spec.Template.Spec.Affinity.PodAntiAffinity
	var term corev1.PodAffinityTerm
	switch {
	case v.hardAnti && len(anti.RequiredDuringSchedulingIgnoredDuringExecution) == 1:
		term = anti.RequiredDuringSchedulingIgnoredDuringExecution[0]
	case !v.hardAnti && len(anti.PreferredDuringSchedulingIgnoredDuringExecution) == 1:
		term = anti.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	default:
		t.Fatalf("masters' anti-affinity %+v: want one %s term", anti, map[bool]string{true: "required", false: "preferred"}[v.hardAnti])
	}
	if !selects(t, term.LabelSelector, podLabels) || term.TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("masters' anti-affinity term %+v does not keep masters apart by host", term)
	}
	// Masters that require a Kubernetes node each cannot surge: the new pod would find none.
	if ru := masters.Spec.Strategy.RollingUpdate; ru == nil || (ru.MaxSurge.IntValue() == 0) != v.hardAnti || ru.MaxSurge.IntValue()+ru.MaxUnavailable.IntValue() != 1 {
		t.Errorf("masters' rolling update %+v: want one master replaced at a time, without a surge when they require a node each", ru)
	}
	pdb := r.get(t, "PodDisruptionBudget", fullname+"-master").(*policyv1.PodDisruptionBudget)
	if !selects(t, pdb.Spec.Selector, podLabels) {
		t.Errorf("the PodDisruptionBudget %v does not select the masters %v", pdb.Spec.Selector, podLabels)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("the PodDisruptionBudget lets %v masters go at once, want 1", pdb.Spec.MaxUnavailable)
	}
	svc := r.get(t, "Service", fullname+"-master").(*corev1.Service)
	for pool, w := range workerDeployments(r) {
		if selects(t, pdb.Spec.Selector, w.Spec.Template.Labels) {
			t.Errorf("the PodDisruptionBudget selects the workers of pool %s", pool)
		}
		if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.Spec.Template.Labels)) {
			t.Errorf("the masters' Service selects the workers of pool %s", pool)
		}
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(podLabels)) {
		t.Errorf("the masters' Service does not select the masters")
	}
	config := nodeConfig(t, r, masters)
	checkNode(t, masters, "master", config["master"].(map[string]any)["port"])
}

func checkWorkers(t *testing.T, v variant, r rendered) {
	got := map[string]int32{}
	for pool, w := range workerDeployments(r) {
		got[pool] = *w.Spec.Replicas
		config := nodeConfig(t, r, w)["worker"].(map[string]any)
		checkNode(t, w, "worker", config["port"])
		shutdown, err := time.ParseDuration(config["shutdown-timeout"].(string))
		if err != nil {
			t.Fatal(err)
		}
		killGrace, err := time.ParseDuration(config["kill-grace"].(string))
		if err != nil {
			t.Fatal(err)
		}
		spec := w.Spec.Template.Spec
		if grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second; grace != shutdown+killGrace+graceMargin {
			t.Errorf("pool %s: terminationGracePeriodSeconds %v, want shutdown-timeout %v + kill-grace %v + %v", pool, grace, shutdown, killGrace, graceMargin)
		}
		c := spec.Containers[0]
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil ||
			!strings.Contains(strings.Join(c.Lifecycle.PreStop.Exec.Command, " "), "kill -TERM 1") {
			t.Errorf("pool %s: preStop %+v does not start the worker's drain", pool, c.Lifecycle)
		}
		if len(c.Command) != 1 || c.Command[0] != "zksched" {
			t.Errorf("pool %s: command %q: the worker must be the container's process 1, which the preStop signals", pool, c.Command)
		}
	}
	if !maps.Equal(got, v.pools) {
		t.Errorf("worker pools %v, want %v", got, v.pools)
	}
	if v.name == "pools" {
		gpu := nodeConfig(t, r, workerDeployments(r)["gpu"])["worker"].(map[string]any)
		if gpu["shutdown-timeout"] != "600s" || !slices.Equal(gpu["groups"].([]any), []any{"gpu"}) || gpu["slots"] != float64(2) {
			t.Errorf("pool gpu's worker config %v: want its own shutdown-timeout, groups and slots", gpu)
		}
	}
}

// checkNode checks a node's container: its HTTP port is the config's, and the probes ask
// /healthz and /readyz on it.
func checkNode(t *testing.T, d *appsv1.Deployment, name string, configPort any) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	if c.Name != name || len(c.Ports) != 1 || c.Ports[0].Name != "http" || float64(c.Ports[0].ContainerPort) != configPort {
		t.Errorf("%s: container %s ports %+v, want one named http on the config's port %v", d.Name, c.Name, c.Ports, configPort)
	}
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.StartupProbe, "/healthz"}, {c.LivenessProbe, "/healthz"}, {c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.StrVal != "http" {
			t.Errorf("%s: probe %+v, want GET %s on port http", d.Name, p.probe, p.path)
		}
	}
	if d.Spec.Template.Spec.AutomountServiceAccountToken == nil || *d.Spec.Template.Spec.AutomountServiceAccountToken {
		t.Errorf("%s: the pods get a service account token, which no node uses", d.Name)
	}
}

// nodeConfig returns the config file a node's container is given (--config), parsed.
func nodeConfig(t *testing.T, r rendered, d *appsv1.Deployment) map[string]any {
	t.Helper()
	text := configFile(t, r, d.Spec.Template.Spec.Containers[0])
	var m map[string]any
	if err := yaml.Unmarshal([]byte(text), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// configFile returns the text of the file a container's --config names, from the ConfigMap
// mounted there.
func configFile(t *testing.T, r rendered, c corev1.Container) string {
	t.Helper()
	i := slices.Index(c.Args, "--config")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("%s: args %q name no --config", c.Name, c.Args)
	}
	dir, file := filepath.Split(c.Args[i+1])
	cm := r.get(t, "ConfigMap", fullname).(*corev1.ConfigMap)
	for _, m := range c.VolumeMounts {
		if filepath.Clean(m.MountPath) == filepath.Clean(dir) && m.Name == "config" {
			text, ok := cm.Data[file]
			if !ok {
				t.Fatalf("%s: --config %s: the ConfigMap has no %s", c.Name, c.Args[i+1], file)
			}
			return text
		}
	}
	t.Fatalf("%s: --config %s: no ConfigMap is mounted there", c.Name, c.Args[i+1])
	return ""
}

// secretValue returns the value of key in the Secret name: a rendered one, or one of the
// user's the variant names.
func secretValue(r rendered, v variant, name, key string, hook bool) (string, error) {
	for _, o := range r.all("Secret") {
		if o.name == name && o.hook == hook {
			s := o.obj.(*corev1.Secret)
			if val, ok := s.Data[key]; ok {
				return string(val), nil
			}
			return "", fmt.Errorf("the Secret %s has no key %s", name, key)
		}
	}
	if val, ok := v.existing[name][key]; ok {
		return val, nil
	}
	return "", fmt.Errorf("no Secret %s with a key %s is rendered or the user's", name, key)
}

// checkSecretRefs: every Secret a node's pod names is rendered with that key, or is the
// user's, and the ZooKeeper credential is mounted exactly when ZooKeeper's ACL is on.
func checkSecretRefs(t *testing.T, v variant, r rendered) {
	for _, o := range r.all("Deployment") {
		spec := o.obj.(*appsv1.Deployment).Spec.Template.Spec
		for _, e := range spec.Containers[0].Env {
			if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
				if _, err := secretValue(r, v, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key, false); err != nil {
					t.Errorf("%s: %s: %v", o.name, e.Name, err)
				}
			}
		}
		zkAuth := false
		for _, vol := range spec.Volumes {
			if vol.Secret == nil {
				continue
			}
			zkAuth = true
			for _, item := range vol.Secret.Items {
				if _, err := secretValue(r, v, vol.Secret.SecretName, item.Key, false); err != nil {
					t.Errorf("%s: volume %s: %v", o.name, vol.Name, err)
				}
			}
		}
		if zkAuth != v.zkAuth {
			t.Errorf("%s: the ZooKeeper credential mounted: %v, want %v", o.name, zkAuth, v.zkAuth)
		}
	}
	for _, o := range r.all("Secret") {
		for name := range v.existing {
			if o.name == name {
				t.Errorf("the chart renders a Secret %s, which is the user's", name)
			}
		}
	}
}

// checkMigrate: `zksched migrate` runs as a Job in the pre-install and pre-upgrade hooks, with
// a DSN it can read then: a hook Secret made before it, or the user's.
func checkMigrate(t *testing.T, v variant, r rendered) {
	var job *batchv1.Job
	for _, o := range r.all("Job") {
		if o.name == fullname+"-migrate" {
			if !o.hook {
				t.Errorf("the migrate Job is in the release's manifest, not a hook")
			}
			job = o.obj.(*batchv1.Job)
		}
	}
	if job == nil {
		t.Fatal("no migrate Job")
	}
	if got := job.Annotations["helm.sh/hook"]; got != "pre-install,pre-upgrade" {
		t.Errorf("migrate Job: helm.sh/hook %q, want pre-install,pre-upgrade", got)
	}
	c := job.Spec.Template.Spec.Containers[0]
	if !slices.Equal(append(slices.Clone(c.Command), c.Args...), []string{"zksched", "migrate"}) {
		t.Errorf("migrate Job runs %q %q", c.Command, c.Args)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "ZKSCHED_DB_DSN" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.SecretKeyRef == nil {
		t.Fatalf("migrate Job env %+v: want ZKSCHED_DB_DSN from a Secret", c.Env)
	}
	ref := c.Env[0].ValueFrom.SecretKeyRef
	_, userSecret := v.existing[ref.Name]
	dsn, err := secretValue(r, v, ref.Name, ref.Key, !userSecret)
	if err != nil {
		t.Fatalf("migrate Job: %v", err)
	}
	if !strings.HasPrefix(dsn, "postgres://") {
		t.Errorf("migrate Job: DSN %q", dsn)
	}
	if !userSecret {
		s := r.get(t, "Secret", ref.Name).(*corev1.Secret)
		sw, _ := strconv.Atoi(s.Annotations["helm.sh/hook-weight"])
		jw, _ := strconv.Atoi(job.Annotations["helm.sh/hook-weight"])
		if s.Annotations["helm.sh/hook"] != job.Annotations["helm.sh/hook"] || sw >= jw {
			t.Errorf("the migrate DSN Secret's hook annotations %v do not make it before the Job's %v", s.Annotations, job.Annotations)
		}
	}
}

// checkMetrics: the metrics Service selects every node, and the ServiceMonitor, rendered only
// when enabled, scrapes its port.
func checkMetrics(t *testing.T, v variant, r rendered) {
	svc := r.get(t, "Service", fullname+"-metrics").(*corev1.Service)
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	for _, o := range r.all("Deployment") {
		if !sel.Matches(labels.Set(o.obj.(*appsv1.Deployment).Spec.Template.Labels)) {
			t.Errorf("the metrics Service does not select the pods of %s", o.name)
		}
	}
	monitors := r.all("ServiceMonitor")
	if got := len(monitors) == 1; got != v.serviceMonitor {
		t.Fatalf("%d ServiceMonitors rendered, want one: %v", len(monitors), v.serviceMonitor)
	}
	if !v.serviceMonitor {
		return
	}
	sm := monitors[0].obj.(*serviceMonitor)
	if !selects(t, &sm.Spec.Selector, svc.Labels) {
		t.Errorf("the ServiceMonitor's selector %v does not select the metrics Service %v", sm.Spec.Selector, svc.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("the ServiceMonitor's endpoints %+v do not scrape /metrics on the Service's port %s", sm.Spec.Endpoints, svc.Spec.Ports[0].Name)
	}
}

// zksched builds the zksched binary once for the tests that run it.
var zksched = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "helmtest-bin-")
	if err != nil {
		return "", err
	}
	// The pod's user runs it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "zksched")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/zksched")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// TestChartConfigChecks: the config the chart renders for each node is one zksched accepts:
// `zksched master|worker --check-config` with the node's args, the files of its mounts
// written where its args and config name them, its environment (Secrets resolved, the pod's
// IP made up) and, where the test runs as root, as the pod's user.
func TestChartConfigChecks(t *testing.T) {
	t.Parallel()
	bin, err := zksched()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			r := renderChart(t, v.values(t))
			for _, o := range r.all("Deployment") {
				runCheckConfig(t, bin, v, r, o.obj.(*appsv1.Deployment))
			}
		})
	}
}

func runCheckConfig(t *testing.T, bin string, v variant, r rendered, d *appsv1.Deployment) {
	t.Helper()
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	// The folders down to the mounts are the pod user's to pass, as in the pod.
	root := t.TempDir()
	for _, dir := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sc := spec.SecurityContext
	uid, gid, fsGroup := int(*sc.RunAsUser), int(*sc.RunAsGroup), int(*sc.FSGroup)
	asRoot := os.Geteuid() == 0
	// The mounts, written as the kubelet would: a ConfigMap's files readable by all, a
	// Secret's with the volume's mode and the pod's fsGroup.
	var mountPaths []string
	for _, m := range c.VolumeMounts {
		mountPaths = append(mountPaths, m.MountPath)
	}
	for _, m := range c.VolumeMounts {
		dir := filepath.Join(root, m.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(spec.Volumes, func(vol corev1.Volume) bool { return vol.Name == m.Name })
		vol := spec.Volumes[i]
		switch {
		case vol.ConfigMap != nil:
			cm := r.get(t, "ConfigMap", vol.ConfigMap.Name).(*corev1.ConfigMap)
			for name, text := range cm.Data {
				writeMounted(t, filepath.Join(dir, name), rewriteMounts(text, root, mountPaths), 0o644, 0, asRoot)
			}
		case vol.Secret != nil:
			for _, item := range vol.Secret.Items {
				val, err := secretValue(r, v, vol.Secret.SecretName, item.Key, false)
				if err != nil {
					t.Fatal(err)
				}
				writeMounted(t, filepath.Join(dir, item.Path), val, os.FileMode(*vol.Secret.DefaultMode), fsGroup, asRoot)
			}
		case vol.EmptyDir != nil:
			if asRoot {
				if err := os.Chown(dir, uid, fsGroup); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + filepath.Join(root, "tmp")}
	for _, e := range c.Env {
		val := e.Value
		switch ref := e.ValueFrom; {
		case ref == nil:
		case ref.FieldRef != nil && ref.FieldRef.FieldPath == "status.podIP":
			val = "10.244.1.7"
		case ref.SecretKeyRef != nil:
			var err error
			if val, err = secretValue(r, v, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key, false); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: env %s: %+v", d.Name, e.Name, ref)
		}
		env = append(env, e.Name+"="+val)
	}
	var args []string
	for _, a := range c.Args {
		args = append(args, rewriteMounts(a, root, mountPaths))
	}
	args = append(args, "--check-config")
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	if asRoot {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{uint32(fsGroup)}}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil || stdout.String() != "config ok\n" {
		t.Errorf("%s: zksched %s: %v, stdout %q, stderr %q", d.Name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
}

// rewriteMounts moves the paths under a container's mounts in s under root, in one pass.
func rewriteMounts(s, root string, mountPaths []string) string {
	sorted := slices.Clone(mountPaths)
	sort.Slice(sorted, func(i, j int) bool { return len(sorted[i]) > len(sorted[j]) })
	var pairs []string
	for _, p := range sorted {
		pairs = append(pairs, p, filepath.Join(root, p))
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

func writeMounted(t *testing.T, path, content string, mode os.FileMode, group int, asRoot bool) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if asRoot {
		if err := os.Chown(path, 0, group); err != nil {
			t.Fatal(err)
		}
	}
}
