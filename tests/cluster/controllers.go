package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/cli"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// kwokStages is how kwok moves the simulated Nodes and their Pods through their lifecycle.
//
//go:embed stages.yaml
var kwokStages []byte

// controllers is what kube-controller-manager runs here: the ones that write the status and
// the objects gitward's health rules, prune and hooks meet in a real cluster.
var controllers = []string{
	"serviceaccount-token-controller", "serviceaccount-controller",
	"root-ca-certificate-publisher-controller", "namespace-controller",
	"garbage-collector-controller", "deployment-controller", "replicaset-controller",
	"statefulset-controller", "daemonset-controller", "job-controller", "cronjob-controller",
	"pod-garbage-collector-controller",
	// Not ttl-after-finished-controller: it deletes a finished Job with ttlSecondsAfterFinished
	// (ingress-nginx's admission Jobs say 0), and gitward's next sync of the same revision
	// creates it again, so the fixtures' resyncs would not be steady. gitward does not yet
	// treat such a Job specially.
	// Lifts the not-ready taint every new Node is created with once kwok reports it Ready
	// (kwok renews the Nodes' Leases, so they stay Ready).
	"node-lifecycle-controller",
}

// nodeCount simulated Nodes, each with room for far more Pods than a test makes.
const nodeCount = 3

// kwokAnnotation marks the Nodes kwok manages (kwok --manage-nodes-with-annotation-selector).
const kwokAnnotation = "kwok.x-k8s.io/node"

// runComponent runs kube-controller-manager or kube-scheduler as its own main does.
func runComponent(name string, args []string) {
	var code int
	switch name {
	case "controller-manager":
		cmd := kcm.NewControllerManagerCommand()
		cmd.SetArgs(args)
		code = cli.Run(cmd)
	case "scheduler":
		cmd := scheduler.NewSchedulerCommand()
		cmd.SetArgs(args)
		code = cli.Run(cmd)
	}
	os.Exit(code)
}

// child is a component serve started as a process of its own; it dies with serve.
type child struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startChild starts path with args; argv[0] is name, so this binary run as
// "kube-controller-manager" sends that user agent and field manager, as in a real cluster.
func startChild(dir, name, path string, args ...string) (*child, error) {
	log := filepath.Join(dir, name+".log")
	out, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(path, args...)
	cmd.Args[0] = name
	cmd.Stdout, cmd.Stderr = out, out
	// Killed with serve even when serve is killed (SIGKILL leaves it no time to stop them).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &child{name: name, log: log, cmd: cmd, done: make(chan struct{})}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	return c, nil
}

// exited reports a child that has stopped, with the end of its log.
func (c *child) exited() error {
	select {
	case <-c.done:
		tail, _ := os.ReadFile(c.log)
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return fmt.Errorf("%s exited (%v); its log ends:\n%s", c.name, c.err, tail)
	default:
		return nil
	}
}

// stop sends SIGTERM and waits up to 5 s, then kills.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// startControllers starts kube-controller-manager, kube-scheduler and kwok against the
// apiserver whose admin kubeconfig is kubeconfig, registers the simulated Nodes, and waits
// until the controllers act (the "default" ServiceAccount exists) and the Nodes are Ready.
func startControllers(dir, kubeconfig, kwok string, c credentials) ([]*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	stages := filepath.Join(dir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, kwokStages, 0o600); err != nil {
		return nil, err
	}
	specs := [][]string{
		{"kube-controller-manager", self, "--kubeconfig=" + kubeconfig,
			"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=true",
			"--service-account-private-key-file=" + c.saKey, "--root-ca-file=" + c.caFile,
			"--controllers=" + strings.Join(controllers, ","), "--v=0"},
		{"kube-scheduler", self, "--kubeconfig=" + kubeconfig, "--leader-elect=false",
			"--secure-port=0", "--v=0"},
		{"kwok", kwok, "--kubeconfig=" + kubeconfig, "--config=" + stages,
			"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=" + kwokAnnotation + "=fake",
			"--cidr=10.244.0.0/16", "--node-ip=10.1.0.1"},
	}
	var children []*child
	for _, s := range specs {
		ch, err := startChild(dir, s[0], s[1], s[2:]...)
		if err != nil {
			stopAll(children)
			return nil, err
		}
		children = append(children, ch)
	}
	if err := settle(kubeconfig, children); err != nil {
		stopAll(children)
		return nil, err
	}
	return children, nil
}

func stopAll(children []*child) {
	done := make(chan struct{})
	for _, c := range children {
		go func() { c.stop(); done <- struct{}{} }()
	}
	for range children {
		<-done
	}
}

// settle registers the Nodes and waits for the controllers and kwok to take them up.
func settle(kubeconfig string, children []*child) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for i := range nodeCount {
		if err := createNode(ctx, client, fmt.Sprintf("kwok-node-%d", i)); err != nil {
			return err
		}
	}
	for {
		for _, c := range children {
			if err := c.exited(); err != nil {
				return err
			}
		}
		if settled(ctx, client) {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("controllers and nodes not ready within 120s (see kube-controller-manager.log, kube-scheduler.log, kwok.log)")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// settled: the ServiceAccount controller made "default" in namespace default (Pods can be
// admitted there) and every simulated Node is Ready and schedulable (the node lifecycle
// controller lifted its not-ready taint).
func settled(ctx context.Context, client kubernetes.Interface) bool {
	if _, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return false
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) < nodeCount {
		return false
	}
	for _, n := range nodes.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		for _, t := range n.Spec.Taints {
			ready = ready && t.Key != corev1.TaintNodeNotReady
		}
		if !ready {
			return false
		}
	}
	return true
}

// createNode registers a simulated Node for kwok (kept when a restarted serve finds it).
func createNode(ctx context.Context, client kubernetes.Interface, name string) error {
	room := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "type": "kwok"},
		},
		Status: corev1.NodeStatus{Allocatable: room, Capacity: room},
	}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
