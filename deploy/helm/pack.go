package helm

import (
	"fmt"
	"os"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// Package writes the chart in dir as NAME-VERSION.tgz into out, the archive `helm package`
// makes, and returns its path. A version or appVersion that is not empty replaces the
// Chart.yaml's (a release packages the chart with its own version).
func Package(dir, out, version, appVersion string) (string, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return "", fmt.Errorf("load the chart: %w", err)
	}
	if version != "" {
		ch.Metadata.Version = version
	}
	if appVersion != "" {
		ch.Metadata.AppVersion = appVersion
	}
	if err := ch.Validate(); err != nil {
		return "", fmt.Errorf("chart %s: %w", dir, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	return chartutil.Save(ch, out)
}
