// Command pack packages the Helm chart into a .tgz, as `helm package` does, with the Helm
// library instead of the helm binary:
//
//	go run ./deploy/helm/pack [-version V] [-app-version V] [-o DIR] [CHART_DIR]
//
// It prints the archive's path. CHART_DIR defaults to deploy/helm/zksched, DIR to dist.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/zksched/zksched/deploy/helm"
)

func main() {
	version := flag.String("version", "", "the chart's version (default: Chart.yaml's)")
	appVersion := flag.String("app-version", "", "the zksched version the chart runs (default: Chart.yaml's)")
	out := flag.String("o", "dist", "folder of the archive")
	flag.Parse()
	dir := "deploy/helm/zksched"
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	path, err := helm.Package(dir, *out, *version, *appVersion)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pack:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}
