// Command testcluster runs a real kube-apiserver with an embedded etcd on loopback, for
// gitward's tests, demo and benchmarks, and doubles as kubectl of the same version.
//
//	testcluster serve [--dir DIR] [--port N] [--audit-log FILE] [--kwok PATH] [--apiserver-only]
//	                                                  start a cluster; print one ready line
//	testcluster kubectl ARGS...                       kubectl (also when invoked as "kubectl")
//	testcluster controller-manager|scheduler ARGS...  kube-controller-manager, kube-scheduler
//
// serve generates a CA, a serving certificate for 127.0.0.1/localhost, two bearer tokens
// (admin in system:masters; "limited" with no bindings, for RBAC tests) and a service-account
// key pair; starts etcd embedded (fsync off) and kube-apiserver in-process; waits for /readyz;
// writes DIR/kubeconfig and DIR/limited.kubeconfig; then (unless --apiserver-only or
// $TESTCLUSTER_APISERVER_ONLY=1) starts kube-controller-manager and kube-scheduler (this binary
// again, as child processes) and kwok (--kwok or $TESTCLUSTER_KWOK) with the stages of
// stages.yaml, registers three simulated Nodes for kwok and waits until the controllers act
// and the Nodes are Ready (controllers.go); prints
//
//	testcluster ready kubeconfig=DIR/kubeconfig limited_kubeconfig=... server=https://127.0.0.1:PORT version=v1.35.4 audit_log=FILE
//
// and runs until its stdin closes or it gets SIGTERM/SIGINT, then stops and removes DIR if it
// made it. Started again with the same --dir and --port, it keeps its credentials and etcd
// data, so clients (and their kubeconfigs) survive a restart: tests use that to stop and
// bring back the apiserver under a running gitward. With --audit-log (or $TESTCLUSTER_AUDIT_LOG) every request is recorded at Metadata
// level (verb, resource, user, user agent) as JSON lines, so tests can count what a client sent.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
)

// auditPolicy records every request once (at ResponseComplete, or Panic) at Metadata level.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

func main() {
	switch filepath.Base(os.Args[0]) {
	case "kubectl":
		runKubectl(os.Args[1:])
	case "kube-controller-manager":
		runComponent("controller-manager", os.Args[1:])
	case "kube-scheduler":
		runComponent("scheduler", os.Args[1:])
	}
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "kubectl":
		runKubectl(os.Args[2:])
	case "controller-manager", "scheduler":
		runComponent(os.Args[1], os.Args[2:])
	case "serve":
		if err := serve(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "testcluster: %v\n", err)
			os.Exit(1)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testcluster serve [--dir DIR] [--audit-log FILE] | testcluster kubectl ARGS...")
	os.Exit(2)
}

// runKubectl runs kubectl exactly as its own main does, with args as its arguments.
func runKubectl(args []string) {
	os.Args = append([]string{"kubectl"}, args...)
	command := kubectlcmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		kubectlutil.CheckErr(err)
	}
	os.Exit(0)
}

type options struct {
	dir           string
	port          int
	auditLog      string
	kwok          string
	apiserverOnly bool
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.dir, "dir", "", "state directory (default: a new temp dir, removed on exit)")
	fs.IntVar(&o.port, "port", 0, "secure port (default: a free one)")
	fs.StringVar(&o.auditLog, "audit-log", os.Getenv("TESTCLUSTER_AUDIT_LOG"), "write a JSON-lines audit log here")
	fs.StringVar(&o.kwok, "kwok", os.Getenv("TESTCLUSTER_KWOK"), "the kwok binary that runs the simulated nodes")
	fs.BoolVar(&o.apiserverOnly, "apiserver-only", os.Getenv("TESTCLUSTER_APISERVER_ONLY") == "1",
		"start kube-apiserver alone: no controllers, scheduler or nodes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !o.apiserverOnly && o.kwok == "" {
		return errors.New("--kwok (or $TESTCLUSTER_KWOK) names the kwok binary, unless --apiserver-only")
	}
	ownDir := o.dir == ""
	if ownDir {
		d, err := os.MkdirTemp("", "testcluster-")
		if err != nil {
			return err
		}
		o.dir = d
		defer os.RemoveAll(d)
	} else if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}

	stop := make(chan struct{})
	go func() { // stdin closed: the parent is gone or done with us.
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	started := time.Now()
	files, err := loadOrWriteCredentials(dir)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	etcd, etcdURL, err := startEtcd(dir)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()

	port := o.port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return err
		}
	}
	flags := apiserverFlags(files, etcdURL, port)
	if o.auditLog != "" {
		policy := filepath.Join(dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
			return err
		}
		// Never rotate: the log is written through lumberjack, which reads a max size of 0 as
		// its default of 100 MB, and a whole suite's log grows past that. A rotation renames
		// the file under tests that count events across it (CI saw a test read 8 events
		// where it had read 58 a moment before). 1 TiB is "never" for a test run.
		flags = append(flags, "--audit-policy-file="+policy, "--audit-log-path="+o.auditLog,
			"--audit-log-format=json", "--audit-log-mode=blocking", "--audit-log-maxsize=1048576")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := apiserver.NewAPIServerCommand()
	cmd.SetArgs(flags)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	server := "https://127.0.0.1:" + strconv.Itoa(port)
	if err := waitReady(server, files, done); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	limited := filepath.Join(dir, "limited.kubeconfig")
	if err := writeKubeconfig(kubeconfig, server, files.caPEM, files.adminToken, "admin"); err != nil {
		return err
	}
	if err := writeKubeconfig(limited, server, files.caPEM, files.limitedToken, "limited"); err != nil {
		return err
	}
	var children []*child
	defer func() { stopAll(children) }()
	if !o.apiserverOnly {
		if children, err = startControllers(dir, kubeconfig, o.kwok, files); err != nil {
			return err
		}
	}
	fmt.Printf("testcluster ready kubeconfig=%s limited_kubeconfig=%s server=%s version=%s audit_log=%s startup_ms=%d\n",
		kubeconfig, limited, server, version.Get().GitVersion, o.auditLog, time.Since(started).Milliseconds())

	select {
	case <-stop:
	case <-sigs:
	case err := <-done:
		return fmt.Errorf("kube-apiserver exited: %v", err)
	}
	stopAll(children) // before the apiserver, so they stop talking to it first
	children = nil
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		fmt.Fprintln(os.Stderr, "testcluster: kube-apiserver did not stop within 10s")
	}
	return nil
}

type credentials struct {
	caPEM, caFile, certFile, keyFile, saPub, saKey, tokenFile string
	adminToken, limitedToken                                  string
}

// loadOrWriteCredentials reuses the credentials a previous run left in dir, else makes them.
func loadOrWriteCredentials(dir string) (credentials, error) {
	c := credentials{
		caFile: filepath.Join(dir, "ca.crt"), certFile: filepath.Join(dir, "server.crt"),
		keyFile: filepath.Join(dir, "server.key"), saPub: filepath.Join(dir, "sa.pub"),
		saKey: filepath.Join(dir, "sa.key"), tokenFile: filepath.Join(dir, "tokens.csv"),
	}
	ca, errCA := os.ReadFile(c.caFile)
	tokens, errTokens := os.ReadFile(c.tokenFile)
	if errCA != nil || errTokens != nil {
		return writeCredentials(dir)
	}
	c.caPEM = string(ca)
	for _, line := range strings.Split(strings.TrimSpace(string(tokens)), "\n") {
		fields := strings.SplitN(line, ",", 3)
		if len(fields) < 2 {
			continue
		}
		switch fields[1] {
		case "admin":
			c.adminToken = fields[0]
		case "limited":
			c.limitedToken = fields[0]
		}
	}
	return c, nil
}

// writeCredentials makes the CA, serving pair, service-account key pair and token file.
func writeCredentials(dir string) (credentials, error) {
	c := credentials{
		caFile: filepath.Join(dir, "ca.crt"), certFile: filepath.Join(dir, "server.crt"),
		keyFile: filepath.Join(dir, "server.key"), saPub: filepath.Join(dir, "sa.pub"),
		saKey: filepath.Join(dir, "sa.key"), tokenFile: filepath.Join(dir, "tokens.csv"),
		adminToken: randomToken(), limitedToken: randomToken(),
	}
	caKey, caCert, caDER, err := newCA()
	if err != nil {
		return c, err
	}
	c.caPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	serverKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return c, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	serverDER, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &serverKey.PublicKey, caKey)
	if err != nil {
		return c, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return c, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return c, err
	}
	writes := []struct {
		path string
		data []byte
	}{
		{c.caFile, []byte(c.caPEM)},
		{c.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: serverDER})},
		{c.keyFile, ecKeyPEM(serverKey)},
		{c.saKey, ecKeyPEM(saKey)},
		{c.saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER})},
		{c.tokenFile, []byte(fmt.Sprintf("%s,admin,admin-uid,\"system:masters\"\n%s,limited,limited-uid\n",
			c.adminToken, c.limitedToken))},
	}
	for _, w := range writes {
		if err := os.WriteFile(w.path, w.data, 0o600); err != nil {
			return c, err
		}
	}
	return c, nil
}

func newCA() (*ecdsa.PrivateKey, *x509.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "testcluster-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return key, cert, der, err
}

func ecKeyPEM(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startEtcd starts a single-member etcd on loopback with its data under dir/etcd, fsync off.
func startEtcd(dir string) (*embed.Etcd, string, error) {
	clientPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	cfg := embed.NewConfig()
	cfg.Name = "testcluster"
	cfg.Dir = filepath.Join(dir, "etcd")
	client := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(clientPort)}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(peerPort)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, client.String(), nil
	case err := <-e.Err():
		e.Close()
		return nil, "", err
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, "", errors.New("not ready within 60s")
	}
}

func apiserverFlags(c credentials, etcdURL string, port int) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + c.certFile,
		"--tls-private-key-file=" + c.keyFile,
		"--client-ca-file=" + c.caFile,
		"--token-auth-file=" + c.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.saPub,
		"--service-account-signing-key-file=" + c.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--v=0",
	}
}

// waitReady polls /readyz with the admin token until it answers 200.
func waitReady(server string, c credentials, done <-chan error) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(c.caPEM))
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return fmt.Errorf("kube-apiserver exited before ready: %v", err)
		default:
		}
		req, _ := http.NewRequest(http.MethodGet, server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.adminToken)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("kube-apiserver not ready within 120s")
}

func writeKubeconfig(path, server, caPEM, token, user string) error {
	ca := base64.StdEncoding.EncodeToString([]byte(caPEM))
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: testcluster
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: %s@testcluster
  context:
    cluster: testcluster
    user: %s
current-context: %s@testcluster
`, server, ca, user, token, user, user, user)
	return os.WriteFile(path, []byte(data), 0o600)
}
