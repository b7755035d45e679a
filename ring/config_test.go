package ring

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewRejectsInvalidConfig(t *testing.T) {
	valid := Config{Name: "n", BindAddr: "127.0.0.1", Fingerprint: Fingerprint{Cluster: "c", RF: 1}}
	for _, tc := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Name = "" }, "Name is empty"},
		{func(c *Config) { c.BindPort = 70000 }, "BindPort 70000"},
		{func(c *Config) { c.AdvertisePort = -1 }, "AdvertisePort -1"},
		{func(c *Config) { c.Fingerprint.Partitions = -3 }, "Fingerprint.Partitions -3"},
		{func(c *Config) { c.Fingerprint.RF = 0 }, "Fingerprint.RF 0"},
		{func(c *Config) { c.Fingerprint.PlacementVersion = 2 }, "Fingerprint.PlacementVersion 2"},
		{func(c *Config) { c.Fingerprint.Cluster = strings.Repeat("x", 600) }, "Fingerprint.Cluster (600 bytes)"},
		{func(c *Config) { c.SecretKey = []byte("short") }, "SecretKey is 5 bytes"},
		{func(c *Config) { c.Preset = "wan" }, `Preset "wan"`},
		{func(c *Config) { c.PushPullInterval = -1 }, "PushPullInterval -1ns"},
		{func(c *Config) { c.BindAddr = "localhost" }, `BindAddr "localhost" is not an IP address`},
		{func(c *Config) { c.AdvertiseAddr = "node1.example" }, `AdvertiseAddr "node1.example" is not an IP address`},
		{func(c *Config) { c.Fingerprint.RF = 1 << 31 }, "Fingerprint.RF 2147483648"},
		{func(c *Config) { c.Fingerprint.Protocol = 1 << 31 }, "Fingerprint.Protocol 2147483648"},
		{func(c *Config) { c.Fingerprint.Partitions = 1 << 31 }, "Fingerprint.Partitions 2147483648"},
	} {
		cfg := valid
		tc.mutate(&cfg)
		r, err := New(cfg)
		require.ErrorIs(t, err, ErrInvalidConfig, tc.want)
		assert.Nil(t, r)
		assert.Contains(t, err.Error(), tc.want)
		assert.True(t, strings.HasPrefix(err.Error(), "ring: "), err.Error())
	}
}

func TestValidateFillsDefaults(t *testing.T) {
	cfg, err := Config{Name: "n", Fingerprint: Fingerprint{RF: 3}}.validate()
	require.NoError(t, err)
	assert.Equal(t, DefaultPartitions, cfg.Fingerprint.Partitions)
	assert.Equal(t, PlacementVersion, cfg.Fingerprint.PlacementVersion)
	assert.Equal(t, PresetLocal, cfg.Preset)
	assert.NotNil(t, cfg.Logger)
}
