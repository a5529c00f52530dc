package helm

import (
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/zksched/zksched/internal/testenv"
)

// TestDocsHelmCommands runs docs/kubernetes.md's commands as printed, the Helm library
// standing in for the helm binary: helm lint and helm template (with the strict decoding of
// every object), and the packaging, whose archive loads back as the chart.
func TestDocsHelmCommands(t *testing.T) {
	t.Parallel()
	block := testenv.DocBlock(t, "docs/kubernetes.md", "Trying the chart", "sh", 1)
	root := testenv.RepoRoot()
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		words := strings.Fields(line)
		t.Run(line, func(t *testing.T) {
			switch {
			case len(words) >= 3 && words[0] == "helm" && words[1] == "lint":
				dir, vals := helmArgs(t, root, words[2:])
				if dir != filepath.Join(root, "deploy/helm", chartDir) {
					t.Fatalf("lints %s, not the chart", dir)
				}
				lintChart(t, vals)
			case len(words) >= 4 && words[0] == "helm" && words[1] == "template" && words[2] == releaseName:
				dir, vals := helmArgs(t, root, words[3:])
				if dir != filepath.Join(root, "deploy/helm", chartDir) {
					t.Fatalf("renders %s, not the chart", dir)
				}
				if r := renderChart(t, vals); len(r.all("Deployment")) < 2 {
					t.Errorf("rendered %d Deployments", len(r.all("Deployment")))
				}
			case len(words) == 5 && strings.Join(words[:3], " ") == "go run ./deploy/helm/pack" && words[3] == "-o":
				path, err := Package(filepath.Join(root, "deploy/helm", chartDir), t.TempDir(), "", "")
				if err != nil {
					t.Fatal(err)
				}
				ch, err := loader.Load(path)
				if err != nil {
					t.Fatal(err)
				}
				if filepath.Base(path) != ch.Metadata.Name+"-"+ch.Metadata.Version+".tgz" || len(ch.Templates) == 0 {
					t.Errorf("packaged %s: chart %s %s with %d templates", path, ch.Metadata.Name, ch.Metadata.Version, len(ch.Templates))
				}
			default:
				t.Fatalf("no test runs %q", line)
			}
		})
	}
}

// helmArgs reads "DIR [-f FILE]..." of a helm command line, the paths from the repository's
// root: the chart's folder and the values the files give, merged as helm merges them.
func helmArgs(t *testing.T, root string, args []string) (string, map[string]any) {
	t.Helper()
	dir := filepath.Join(root, args[0])
	vals := map[string]any{}
	for rest := args[1:]; len(rest) > 0; rest = rest[2:] {
		if len(rest) < 2 || rest[0] != "-f" {
			t.Fatalf("flags %q: want -f FILE", rest)
		}
		v, err := chartutil.ReadValuesFile(filepath.Join(root, rest[1]))
		if err != nil {
			t.Fatal(err)
		}
		vals = chartutil.CoalesceTables(v.AsMap(), vals)
	}
	return dir, vals
}

// TestPackageVersions: a release packages the chart with its own versions.
func TestPackageVersions(t *testing.T) {
	t.Parallel()
	path, err := Package(chartDir, t.TempDir(), "1.2.3", "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "zksched-1.2.3.tgz" || ch.Metadata.Version != "1.2.3" || ch.Metadata.AppVersion != "1.2.3" {
		t.Errorf("packaged %s: version %s, appVersion %s; want 1.2.3 both", path, ch.Metadata.Version, ch.Metadata.AppVersion)
	}
}
