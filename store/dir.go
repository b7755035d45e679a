package store

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// makeDir creates dir and its missing parents and, unless noSync, syncs
// the parent of each directory it created: without that, a power cut soon
// after a node's first start could lose the whole data directory, and the
// node would come back as one that lost its disk. The entries inside dir
// are synced as its files are created (openWAL).
func makeDir(dir string, noSync bool) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		_, err := os.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if noSync {
		return nil
	}
	for _, d := range created {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// syncDir fsyncs a directory, making the entries of the files and
// directories created in it durable. A variable, so that tests can see
// which directories are synced.
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
