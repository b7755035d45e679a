package pgserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
)

// SearchDirs are where distributions put initdb and postgres when they are
// not on PATH (Debian and Ubuntu: one directory per major version). They
// are filepath.Glob patterns.
var SearchDirs = []string{"/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin", "/usr/pgsql-*/bin"}

// BinDir returns the first directory that holds both initdb and postgres:
// initdb's directory if it is on PATH, else the matches of SearchDirs, the
// last in lexical order first (the newest version, for versions 10 and
// later). It returns ErrNotInstalled if there is none.
func BinDir() (string, error) {
	return findBinDir(SearchDirs)
}

func findBinDir(patterns []string) (string, error) {
	var dirs []string
	if initdb, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(initdb))
	}
	for _, pat := range patterns {
		matches, _ := filepath.Glob(pat)
		slices.Reverse(matches)
		dirs = append(dirs, matches...)
	}
	for _, d := range dirs {
		if hasServer(d) {
			return d, nil
		}
	}
	return "", ErrNotInstalled
}

// hasServer reports whether dir holds executable initdb and postgres files.
func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}
