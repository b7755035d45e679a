// Command node is the robustness harness's node program: a router.Node with
// register and counter handlers, on its own loopback IP with a faultnet
// network, and an HTTP control and client API (see package api) on the same
// IP. The harness starts several as separate processes. It prints "READY"
// on stdout once it serves, and exits on SIGTERM (a clean Close, no
// handoff) or after POST /leave (a graceful Leave).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/singlewriter/singlewriter/internal/faultnet"
	"github.com/singlewriter/singlewriter/router"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		name       = flag.String("name", "", "node name")
		ipFlag     = flag.String("ip", "127.0.0.2", "the node's loopback IP")
		dir        = flag.String("dir", "", "data directory")
		gossipPort = flag.Int("gossip-port", 7946, "gossip port")
		rpcPort    = flag.Int("rpc-port", 7947, "RPC port")
		httpPort   = flag.Int("http-port", 7948, "control API port")
		seeds      = flag.String("seeds", "", "comma-separated gossip addresses")
		bootstrap  = flag.Bool("bootstrap", false, "create the cluster")
		partitions = flag.Int("partitions", 64, "partition count")
		seed       = flag.Uint64("seed", 1, "seed of the network's drop decisions")
		rf         = flag.Int("rf", 0, "replication factor (0: the library's default)")
	)
	flag.Parse()
	ip := net.ParseIP(*ipFlag)
	if ip == nil {
		return fmt.Errorf("bad -ip %q", *ipFlag)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fn := faultnet.New(ip, *seed)
	host := ip.String()
	cfg := router.Config{
		Name:              *name,
		DataDir:           *dir,
		GossipAddr:        net.JoinHostPort(host, strconv.Itoa(*gossipPort)),
		RPCAddr:           net.JoinHostPort(host, strconv.Itoa(*rpcPort)),
		Bootstrap:         *bootstrap,
		Partitions:        *partitions,
		ReplicationFactor: *rf,
		SettleTime:        100 * time.Millisecond,
		DrainTimeout:      300 * time.Millisecond,
		PushPullInterval:  500 * time.Millisecond,
		Network:           fn,
		Logger:            logger,
	}
	if *seeds != "" {
		cfg.Seeds = strings.Split(*seeds, ",")
	}
	n, err := router.New(cfg)
	if err != nil {
		return err
	}
	p := &pauser{}
	register(n, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(*httpPort)))
	if err != nil {
		n.Close()
		return err
	}
	c := &control{node: n, net: fn, pause: p, partitions: *partitions, left: make(chan struct{})}
	srv := &http.Server{Handler: c.mux()}
	go srv.Serve(ln)
	fmt.Println("READY")
	logger.Info("node ready", "name", *name, "ip", host)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
		err = n.Close()
	case <-c.left:
	}
	shutdown, cancelShutdown := context.WithTimeout(context.Background(), time.Second)
	defer cancelShutdown()
	return errors.Join(err, srv.Shutdown(shutdown))
}
