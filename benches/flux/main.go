// Command flux-apply applies a directory of manifests the way Flux's kustomize-controller does:
// github.com/fluxcd/pkg/ssa ResourceManager.ApplyAllStaged with ssa.DefaultApplyOptions(), then
// deletes the objects of the previous run's inventory that are no longer in the directory.
// Usage: flux-apply DIR INVENTORY_FILE. Used by benches/bench.py as the Flux peer.
//
// flux-apply fleet UNITS_FILE applies many units the way one kustomize-controller reconciles
// many Kustomizations: each line of UNITS_FILE is `DIR<TAB>NAMESPACE` (the unit's manifests and
// its target namespace, set on objects that name none), and 4 workers (the controller's
// --concurrent default) each run ApplyAllStaged of one unit at a time through one shared client
// (QPS 50, burst 300). No source fetch, kustomize build or health check: the apply engine alone.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func main() {
	var err error
	if os.Args[1] == "fleet" {
		err = fleet(os.Args[2])
	} else {
		err = run(os.Args[1], os.Args[2])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// manager is the ResourceManager kustomize-controller builds: one client with the controller's
// rate limits, a status poller, SetConcurrency(4).
func manager() (*ssa.ResourceManager, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "flux-bench"
	cfg.QPS, cfg.Burst = 50, 300 // kustomize-controller's defaults (--kube-api-qps/--kube-api-burst)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	poller := polling.NewStatusPoller(c, c.RESTMapper(), polling.Options{})
	rm := ssa.NewResourceManager(c, poller, ssa.Owner{Field: "kustomize-controller", Group: "kustomize.toolkit.fluxcd.io"})
	// As kustomize-controller runs it: its --concurrent-ssa flag defaults to 4
	// (kustomization_controller.go calls SetConcurrency with it); the library's own default is 1.
	rm.SetConcurrency(4)
	return rm, nil
}

// fleet applies every unit of unitsFile (DIR<TAB>NAMESPACE per line), 4 units at a time.
func fleet(unitsFile string) error {
	ctx := context.Background()
	rm, err := manager()
	if err != nil {
		return err
	}
	text, err := os.ReadFile(unitsFile)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(string(text)), "\n")
	jobs := make(chan string)
	errs := make(chan error, len(lines))
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ { // kustomize-controller's --concurrent default
		wg.Add(1)
		go func() {
			defer wg.Done()
			for line := range jobs {
				dir, namespace, _ := strings.Cut(line, "\t")
				objects, err := read(dir)
				if err == nil {
					for _, o := range objects {
						if o.GetNamespace() == "" {
							o.SetNamespace(namespace)
						}
					}
					_, err = rm.ApplyAllStaged(ctx, objects, ssa.DefaultApplyOptions())
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", dir, err)
				}
			}
		}()
	}
	for _, line := range lines {
		jobs <- line
	}
	close(jobs)
	wg.Wait()
	close(errs)
	return <-errs
}

// read returns the objects of every .yaml file under dir.
func read(dir string) ([]*unstructured.Unstructured, error) {
	var objects []*unstructured.Unstructured
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		objs, err := utils.ReadObjects(f)
		objects = append(objects, objs...)
		return err
	})
	return objects, err
}

func run(dir, inventory string) error {
	ctx := context.Background()
	rm, err := manager()
	if err != nil {
		return err
	}
	objects, err := read(dir)
	if err != nil {
		return err
	}
	_, err = rm.ApplyAllStaged(ctx, objects, ssa.DefaultApplyOptions())
	if err != nil {
		return err
	}
	// Prune: objects of the previous inventory not applied now, as Flux's inventory diff does.
	keep := map[string]bool{}
	for _, o := range objects {
		keep[key(o)] = true
	}
	var stale []*unstructured.Unstructured
	if old, err := os.ReadFile(inventory); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(old)), "\n") {
			parts := strings.Split(line, "\t")
			if len(parts) != 5 || keep[parts[0]] {
				continue
			}
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(parts[1])
			u.SetKind(parts[2])
			u.SetNamespace(parts[3])
			u.SetName(parts[4])
			stale = append(stale, u)
		}
	}
	if len(stale) > 0 {
		if _, err := rm.DeleteAll(ctx, stale, ssa.DefaultDeleteOptions()); err != nil {
			return err
		}
	}
	var b strings.Builder
	for _, o := range objects {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\n", key(o), o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName())
	}
	return os.WriteFile(inventory, []byte(b.String()), 0o644)
}

func key(o *unstructured.Unstructured) string {
	return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}
