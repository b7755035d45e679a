package ring

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// Presets of memberlist timing, for Config.Preset.
const (
	// PresetLocal is memberlist.DefaultLocalConfig, for loopback and tests:
	// probe every 1s with a 200ms timeout, suspicion 3 probe intervals. A
	// crashed node leaves the others' tables after about 4-5s.
	PresetLocal = "local"
	// PresetLAN is memberlist.DefaultLANConfig, for a data-center network:
	// probe every 1s with a 500ms timeout, suspicion 4*log10(n) probe
	// intervals (at least 4). A crashed node leaves the others' tables after
	// about 5-7s in a small cluster.
	PresetLAN = "lan"
)

// MaxClusterIDLen bounds Config.ClusterID and SetClusterID's id, so that
// the metadata always fits memberlist's.
const MaxClusterIDLen = 64

// deadNodeReclaimTime is how long a crashed node's name stays reserved for its
// old address. After it, the node may come back under the same name from
// another address (a restarted container), which memberlist otherwise refuses
// forever. Only a dead or left name is reclaimed, never a live one.
const deadNodeReclaimTime = 5 * time.Second

// Config configures a Ring. Name and Fingerprint.RF are required.
type Config struct {
	// Name is the node's name, unique in the cluster. Required.
	Name string

	// BindAddr is the IP address gossip listens on (UDP and TCP). Empty means
	// "0.0.0.0", all interfaces.
	BindAddr string
	// BindPort is the gossip port. Zero picks a free port; GossipAddr reports
	// it.
	BindPort int

	// AdvertiseAddr is the IP address other nodes reach this one at. Empty
	// means BindAddr, or a private address of this host if BindAddr is
	// "0.0.0.0".
	AdvertiseAddr string
	// AdvertisePort is the port other nodes reach this one at. Zero means the
	// bound port; it is also ignored when BindPort is zero.
	AdvertisePort int

	// RPCAddr is the node's RPC address, carried in its gossip metadata and
	// published in Table.Members. The ring never dials it.
	RPCAddr string

	// Fingerprint is what this node requires every other node to share;
	// nodes with another fingerprint are refused (and logged at Warn).
	Fingerprint Fingerprint

	// ClusterID is the ID of the cluster this node belongs to, "" while it
	// has none (a new node learns it from its peers; see SetClusterID).
	// Nodes whose IDs are both set and differ never count each other as
	// members, and a node refuses to join seeds that all carry another ID.
	ClusterID string

	// Founder marks a node started to create a new cluster if it finds
	// none; Founders lists such members.
	Founder bool

	// Seeds are gossip addresses (host:port) that Join contacts. Empty means
	// Join starts a cluster of one.
	Seeds []string

	// Delegate is the consumer's replicated state, carried by gossip. Nil means
	// none.
	Delegate Delegate

	// SecretKey, if set, encrypts gossip with AES (16, 24 or 32 bytes for
	// AES-128/192/256). Every node needs the same key; nodes with another key
	// cannot talk to this one. Empty means no encryption.
	SecretKey []byte

	// Preset is PresetLocal (the default, when empty) or PresetLAN; it picks
	// memberlist's probe, suspicion and gossip timing, hence how fast a crash
	// is detected.
	Preset string

	// PushPullInterval is how often a node exchanges full state (memberlist and
	// Delegate.LocalState) with a random peer. Zero keeps the preset's: 15s
	// for PresetLocal, 30s for PresetLAN. Shorter heals missed broadcasts
	// sooner at the cost of bandwidth.
	PushPullInterval time.Duration

	// Transport carries gossip packets and streams. Nil means memberlist's
	// own network transport bound on BindAddr:BindPort, whose dials the
	// ring aborts when it closes and when Join's context ends. A transport
	// given here is already bound (BindAddr and BindPort are then only
	// reported in errors); GossipAddr reports the address it advertises.
	// Its dials are its own: Close, Leave and Join wait for a dial in
	// progress to end. Tests use it to cut, delay and drop gossip.
	Transport memberlist.NodeAwareTransport

	// Logger receives the ring's logs and memberlist's (its errors at
	// Warn, its warnings at Info, the rest at Debug). Nil discards them.
	Logger *slog.Logger
}

// meta returns the metadata this node starts with.
func (cfg Config) meta() nodeMeta {
	return nodeMeta{RPCAddr: cfg.RPCAddr, Fingerprint: cfg.Fingerprint, ClusterID: cfg.ClusterID, Founder: cfg.Founder}
}

// Validate returns the error New would return for cfg's values (wrapping
// ErrInvalidConfig, naming the offending field and value), without
// starting anything.
func (cfg Config) Validate() error {
	_, err := cfg.validate()
	return err
}

// maxMetaInt is the largest number a node's metadata carries.
const maxMetaInt = 1<<31 - 1

// validate returns cfg with defaults filled in, or an error wrapping
// ErrInvalidConfig that names the offending field and value.
func (cfg Config) validate() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if cfg.Name == "" {
		return bad("Name is empty")
	}
	if cfg.BindPort < 0 || cfg.BindPort > 65535 {
		return bad("BindPort %d is outside 0..65535", cfg.BindPort)
	}
	if cfg.AdvertisePort < 0 || cfg.AdvertisePort > 65535 {
		return bad("AdvertisePort %d is outside 0..65535", cfg.AdvertisePort)
	}
	// memberlist binds every interface for a host name and advertises
	// the unspecified address, which sends the others to themselves.
	for _, a := range []struct{ field, addr string }{{"BindAddr", cfg.BindAddr}, {"AdvertiseAddr", cfg.AdvertiseAddr}} {
		if a.addr != "" && net.ParseIP(a.addr) == nil {
			return bad("%s %q is not an IP address", a.field, a.addr)
		}
	}
	fp := &cfg.Fingerprint
	if fp.Partitions == 0 {
		fp.Partitions = DefaultPartitions
	}
	if fp.Partitions < 0 || fp.Partitions > maxMetaInt {
		return bad("Fingerprint.Partitions %d is outside 1..%d", fp.Partitions, maxMetaInt)
	}
	if fp.RF < 1 || fp.RF > maxMetaInt {
		return bad("Fingerprint.RF %d is outside 1..%d", fp.RF, maxMetaInt)
	}
	if fp.Protocol < 0 || fp.Protocol > maxMetaInt {
		return bad("Fingerprint.Protocol %d is outside 0..%d", fp.Protocol, maxMetaInt)
	}
	if fp.PlacementVersion == 0 {
		fp.PlacementVersion = PlacementVersion
	}
	if fp.PlacementVersion != PlacementVersion {
		return bad("Fingerprint.PlacementVersion %d is not this package's %d", fp.PlacementVersion, PlacementVersion)
	}
	if len(cfg.ClusterID) > MaxClusterIDLen {
		return bad("ClusterID is %d bytes, more than %d", len(cfg.ClusterID), MaxClusterIDLen)
	}
	// Leave room for any cluster ID SetClusterID may set later.
	longest := cfg.meta()
	longest.ClusterID = strings.Repeat("x", MaxClusterIDLen)
	if meta := encodeMeta(longest); len(meta) > memberlist.MetaMaxSize {
		return bad("RPCAddr (%d bytes), Fingerprint.Cluster (%d bytes) and Fingerprint.Settings (%d bytes) exceed memberlist's %d-byte metadata",
			len(cfg.RPCAddr), len(fp.Cluster), len(fp.Settings), memberlist.MetaMaxSize)
	}
	switch n := len(cfg.SecretKey); n {
	case 0, 16, 24, 32:
	default:
		return bad("SecretKey is %d bytes, want 16, 24 or 32", n)
	}
	switch cfg.Preset {
	case "":
		cfg.Preset = PresetLocal
	case PresetLocal, PresetLAN:
	default:
		return bad("Preset %q is neither %q nor %q", cfg.Preset, PresetLocal, PresetLAN)
	}
	if cfg.PushPullInterval < 0 {
		return bad("PushPullInterval %v is negative", cfg.PushPullInterval)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// memberlistConfig returns the memberlist configuration for a validated cfg,
// with h as every delegate.
func (cfg Config) memberlistConfig(h *hooks) *memberlist.Config {
	mc := memberlist.DefaultLocalConfig()
	if cfg.Preset == PresetLAN {
		mc = memberlist.DefaultLANConfig()
	}
	mc.Name = cfg.Name
	if cfg.BindAddr != "" {
		mc.BindAddr = cfg.BindAddr
	}
	mc.BindPort = cfg.BindPort
	mc.AdvertiseAddr = cfg.AdvertiseAddr
	mc.AdvertisePort = cfg.AdvertisePort
	if mc.AdvertisePort == 0 {
		mc.AdvertisePort = cfg.BindPort
	}
	if cfg.PushPullInterval > 0 {
		mc.PushPullInterval = cfg.PushPullInterval
	}
	mc.SecretKey = cfg.SecretKey
	if cfg.Transport != nil {
		mc.Transport = cfg.Transport
	}
	mc.DeadNodeReclaimTime = deadNodeReclaimTime
	mc.Delegate = h
	mc.Events = h
	mc.Alive = h
	mc.Merge = h
	mc.Conflict = h
	mc.Logger = newMemberlistLogger(cfg.Logger)
	return mc
}
