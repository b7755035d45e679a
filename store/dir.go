package store

import (
	"errors"
	"io/fs"
	"os"
	"runtime"
)

// makeDir creates dir and its missing parents and, unless noSync, syncs
// the parent of each directory it created, and dir's parent on a first
// start (fresh: the data file does not exist yet), when another program
// may have made dir just before. Without that, a power cut soon after a
// node's first start could lose the whole data directory, and the node
// would come back as one that lost its disk. The entries inside dir are
// synced as its files are created (openWAL).
func makeDir(dir string, fresh, noSync bool) error {
	var created []string
	for d := dir; ; d = parentDir(d) {
		_, err := os.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if parentDir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if noSync {
		return nil
	}
	if len(created) == 0 && fresh {
		created = append(created, dir)
	}
	for _, d := range created {
		if err := syncDir(parentDir(d)); err != nil {
			return err
		}
	}
	return nil
}

// parentDir returns the directory that holds path, as os.MkdirAll finds
// it: path without its last element, as written. It is not cleaned, so
// that the system resolves a ".." after a symbolic link, as it does for
// MkdirAll.
func parentDir(path string) string {
	i := len(path)
	for i > 0 && os.IsPathSeparator(path[i-1]) {
		i--
	}
	for i > 0 && !os.IsPathSeparator(path[i-1]) {
		i--
	}
	switch {
	case i == 0:
		return "."
	case i == 1:
		return path[:1]
	}
	for i > 1 && os.IsPathSeparator(path[i-1]) {
		i--
	}
	return path[:i]
}

// syncDir fsyncs a directory, making the entries of the files and
// directories created in it durable. A variable, so that tests can see
// which directories are synced. On Windows it does nothing: a directory
// cannot be opened for writing there, so flushing it fails (NTFS
// journals its metadata).
var syncDir = func(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
