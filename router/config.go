package router

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/singlewriter/singlewriter/ring"
)

// DefaultReplicationFactor is the replication factor of a Config that
// sets none.
const DefaultReplicationFactor = 3

// defaultMaxPayload is Config.MaxPayload when it is zero.
const defaultMaxPayload = 1 << 20

// Bounds of Config.
const (
	// MaxPartitions bounds Config.Partitions: each partition has its own
	// state in memory and in the store on every node.
	MaxPartitions = 1 << 16
	// MaxPayloadLimit bounds Config.MaxPayload: a call, with its key and
	// method, travels between nodes in one frame, which must stay within
	// the frame limit of 4 GiB, and a value in the store within bbolt's.
	MaxPayloadLimit = 1 << 30
)

// Config configures a Node. Zero values are documented defaults.
type Config struct {
	// Name is the node's unique name in the cluster. Required. A node that
	// restarts with the same DataDir must keep its Name.
	Name string
	// DataDir holds the node's store. Required; created if missing. Only
	// one process may open it at a time.
	DataDir string
	// GossipAddr is the host:port memberlist binds for gossip (UDP and
	// TCP). Its host must be an IP address (empty: every interface, and
	// the others are told a private address of this host). Zero means
	// "127.0.0.1:0": loopback, a free port.
	GossipAddr string
	// RPCAddr is the host:port the node listens on for calls and protocol
	// messages, and the address the other nodes are told to dial, so its
	// host must be this node's address, not 0.0.0.0, :: or empty. Zero
	// means "127.0.0.1:0".
	RPCAddr string
	// Seeds are gossip addresses of existing members to join (a name
	// stands for every address it resolves to). Give several: any reachable
	// one is enough. Start waits until one of them answers, so a node
	// restarted while all its seeds are down waits for one; this node's
	// own address among them is skipped, and a node whose only seed is
	// itself starts alone.
	Seeds []string
	// Bootstrap creates a new cluster, at Start, when DataDir holds none
	// and the seeds (if any) belong to none. Set it on one node of a new
	// cluster; of several nodes with it that see each other, the one whose
	// name sorts first creates the cluster, and the others' Start waits
	// until it reaches them or Start's ctx ends (they then create none: if
	// that node never creates it, start them again once it is gone). It is
	// ignored on a restart with the same DataDir, and a node
	// that lost its DataDir and starts again with Bootstrap set joins the
	// cluster of its seeds. Without seeds it cannot know there is one: it
	// creates a second cluster ID and claims every partition for itself,
	// so calls that enter there may be served from its empty store. So
	// give the bootstrap node seeds too (its Start then waits until one
	// answers), or start a replacement without Bootstrap.
	Bootstrap bool
	// AcceptDataLoss lets this node serve, empty, the partitions whose only
	// copy it was (replication factor 1) after it lost its DataDir and
	// came back under its Name. Without it they stay unavailable, the node
	// logs each at error level and Settled stays false, until the
	// directory is restored or the node restarts with AcceptDataLoss: the
	// keys of those partitions then start again from nothing, and retries
	// of calls answered before run again. With replicas it changes
	// nothing: they hold the data, and this node is synced from them.
	AcceptDataLoss bool
	// Cluster names the cluster. Nodes of another name are refused. Zero
	// means "singlewriter".
	Cluster string
	// Partitions is the fixed number of partitions, at most MaxPartitions.
	// All nodes must agree. Zero means 271.
	Partitions int
	// ReplicationFactor is the number of copies of each partition: its
	// owner and ReplicationFactor-1 backups, chosen per partition among the
	// other members. 1, 3 or 5; all nodes must agree. Zero means 3. With 3
	// (5), a partition survives the crash of 1 (2) of its replicas, and
	// every call waits for a majority of them; with 1, a call waits for the
	// owner's disk only, and a crashed node's partitions wait for it to
	// restart. A cluster smaller than the factor keeps a copy on every node.
	ReplicationFactor int
	// MaxPayload bounds a call's payload in bytes, and the size of its
	// result: its response plus the value its handler writes. A larger
	// payload fails before it is sent (ErrPayloadTooLarge), a larger result
	// after the handler ran, writing nothing (ErrResultTooLarge). Zero
	// means 1 MiB; at most MaxPayloadLimit. Every node must use the same
	// value: a node with another is refused at join, so changing it takes
	// a restart of the whole cluster.
	MaxPayload int
	// MaxPendingCalls bounds the calls this node holds as their keys'
	// owner at once, from their arrival until their answer: queued behind
	// their key's earlier calls, running, or waiting for their commit (a
	// queued call whose caller gave up counts until its turn comes, when
	// it is dropped). A call beyond it fails at once with ErrOverloaded,
	// before its handler runs, so that a burst larger than the node can
	// serve is refused instead of held in memory (each call keeps its
	// payload) until its callers give up; so is a retry that would only
	// have returned a stored response. Zero means 10,000; negative means no
	// bound.
	MaxPendingCalls int
	// SecretKey, if set, encrypts gossip (16, 24 or 32 bytes) and
	// authenticates the setup of RPC connections (each end proves it
	// knows the key before a request is read), which keeps out whoever
	// can reach the RPC port without the key. RPC frames are neither
	// encrypted nor authenticated one by one, so it does not protect
	// against an attacker on the network path: set TLS too, or run the
	// cluster on a trusted network or in a tunnel. It must be the same on
	// every node. New keeps a copy.
	SecretKey []byte
	// TLS, if set, carries the RPC connections between nodes (calls,
	// replication, the ownership protocol) over TLS with this
	// configuration, which encrypts and authenticates every frame: the
	// node's listener serves it and each of its dials is a client of it.
	// It must hold the node's certificate (Certificates, GetCertificate or
	// GetConfigForClient) and the pool that verifies its peers' (RootCAs);
	// for mutual authentication, which keeps out whoever has no
	// certificate of the cluster, set ClientCAs and ClientAuth
	// (tls.RequireAndVerifyClientCert) too, with a certificate the dials
	// present (Certificates or GetClientCertificate). Peers dial the IP
	// address and port the node's RPC listener bound (a host name in
	// RPCAddr is resolved), and a dial verifies the peer's certificate
	// against ServerName or, when that is empty, that IP: give every
	// node's certificate an IP SAN of its address, or every node one
	// shared name in its certificate and in ServerName. Gossip does not
	// use it: encrypt gossip with SecretKey. New keeps a copy. Nil means
	// plain TCP. Every node must use TLS or none.
	TLS *tls.Config
	// SettleTime is how long the membership view must be stable before the
	// node acquires partitions. Zero means 300ms.
	SettleTime time.Duration
	// DrainTimeout bounds the wait for in-flight calls when a partition
	// moves away; the handlers still running then have their ctx
	// cancelled (see Handler), and their commits are fenced. Zero means 2s.
	DrainTimeout time.Duration
	// DedupRetention is how long a call's response is kept for retries
	// with the same request ID. Zero means 1h. Call retries for at most
	// half of it (see Call), a margin for the nodes' clocks and for
	// nodes configured with less: give every node the same value.
	DedupRetention time.Duration
	// GossipPreset is memberlist's preset: "local" (the default: a crash
	// is detected in about 4-5s) or "lan" (about 5-7s in a small cluster,
	// fewer messages).
	GossipPreset string
	// PushPullInterval is the period of full gossip state exchanges. Zero
	// keeps the preset's (15s for "local", 30s for "lan"); tests shorten it.
	PushPullInterval time.Duration
	// Network provides the node's sockets: its RPC listener, its RPC dials
	// and its gossip transport. Nil means the operating system's. Tests set
	// it to cut, delay and drop links.
	Network Network
	// Logger receives the node's events. Nil discards them.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Name == "" {
		return errors.New("router: Config.Name is empty")
	}
	if c.DataDir == "" {
		return errors.New("router: Config.DataDir is empty")
	}
	if c.GossipAddr == "" {
		c.GossipAddr = "127.0.0.1:0"
	}
	if c.RPCAddr == "" {
		c.RPCAddr = "127.0.0.1:0"
	}
	_, port, err := net.SplitHostPort(c.GossipAddr)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		return fmt.Errorf("router: Config.GossipAddr %q: %w", c.GossipAddr, err)
	}
	host, _, err := net.SplitHostPort(c.RPCAddr)
	if err != nil {
		return fmt.Errorf("router: Config.RPCAddr %q: %w", c.RPCAddr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		// The bound address is what the other nodes are told to dial.
		return fmt.Errorf("router: Config.RPCAddr %q has no host the other nodes can dial (it would send them to their own machine): give this node's address", c.RPCAddr)
	}
	if c.TLS != nil {
		if err := checkTLS(c.TLS); err != nil {
			return err
		}
		c.TLS = c.TLS.Clone()
	}
	// Read on every handshake and gossip packet: a caller that wipes its
	// key after New must not change it.
	c.SecretKey = bytes.Clone(c.SecretKey)
	if c.Cluster == "" {
		c.Cluster = "singlewriter"
	}
	if c.Partitions == 0 {
		c.Partitions = ring.DefaultPartitions
	}
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		return fmt.Errorf("router: Config.Partitions is %d, want 1 to %d", c.Partitions, MaxPartitions)
	}
	switch c.ReplicationFactor {
	case 0:
		c.ReplicationFactor = DefaultReplicationFactor
	case 1, 3, 5:
	default:
		return fmt.Errorf("router: Config.ReplicationFactor is %d, want 1, 3 or 5", c.ReplicationFactor)
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = defaultMaxPayload
	}
	if c.MaxPayload < 0 || c.MaxPayload > MaxPayloadLimit {
		return fmt.Errorf("router: Config.MaxPayload is %d, want 1 to %d", c.MaxPayload, MaxPayloadLimit)
	}
	if c.MaxPendingCalls == 0 {
		c.MaxPendingCalls = 10_000
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"SettleTime", c.SettleTime}, {"DrainTimeout", c.DrainTimeout}, {"DedupRetention", c.DedupRetention}, {"PushPullInterval", c.PushPullInterval}} {
		if d.d < 0 {
			return fmt.Errorf("router: Config.%s is %s, want >= 0 (0 for the default)", d.name, d.d)
		}
	}
	if c.DedupRetention == 0 {
		c.DedupRetention = time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := c.gossipConfig().Validate(); err != nil {
		return fmt.Errorf("router: Config.GossipAddr, Config.GossipPreset, Config.SecretKey or Config.Cluster: %w", err)
	}
	return nil
}

// fingerprint is what two nodes must share to talk. MaxPayload is in it:
// a result one node commits must fit the frames of the node that called.
func (c *Config) fingerprint() ring.Fingerprint {
	return ring.Fingerprint{
		Cluster: c.Cluster, Partitions: c.Partitions, RF: c.ReplicationFactor,
		PlacementVersion: placementVersion, Protocol: protocolVersion,
		Settings: fmt.Sprintf("max-payload=%d", c.MaxPayload),
	}
}

// gossipConfig is the ring's configuration as far as a validated c gives
// it: Start adds the RPC address it listens on, the cluster ID, the
// delegate and, with Config.Network, the transport. Until then RPCAddr is
// the configured one.
func (c *Config) gossipConfig() ring.Config {
	host, port, _ := net.SplitHostPort(c.GossipAddr)
	bindPort, _ := strconv.Atoi(port)
	return ring.Config{
		Name: c.Name, BindAddr: host, BindPort: bindPort, RPCAddr: c.RPCAddr,
		Fingerprint: c.fingerprint(), Founder: c.Bootstrap, Seeds: c.Seeds,
		SecretKey: c.SecretKey, Preset: c.GossipPreset, PushPullInterval: c.PushPullInterval,
		Logger: c.Logger,
	}
}
