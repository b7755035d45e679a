// Package smallfs gives tests a small file system of their own, to fill
// up: what a full disk does to a store, and to the node above it, is
// tested on a real one.
package smallfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Mount mounts a new ext4 file system of size bytes, made in a file, on a
// directory it returns, and unmounts it when the test ends. It skips the
// test where that is not possible (not root, no mkfs.ext4, no loop
// device).
func Mount(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Skip("mkfs.ext4 is not installed (Debian: e2fsprogs)")
	}
	base := t.TempDir()
	image, dir := filepath.Join(base, "fs.img"), filepath.Join(base, "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(image, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(image, size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-F", image).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4 failed: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", image, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a loop device here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}
