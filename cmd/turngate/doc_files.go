package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/turngate/turngate/admin"
	"github.com/turngate/turngate/graph/extension"
)

// docFile is a file `docs add` imports, read and checked.
type docFile struct {
	path  string // as the operator named it, or below the folder named
	title string
	body  string
}

// readDocFiles reads and checks every file args name — folders expanded
// into the Markdown and text files below them — before anything is added,
// so that a bad file refuses the whole import. Title, when not empty, is
// the one file's title. Every problem is reported, not only the first.
//
// A folder may come from anywhere (a clone, an export), so its contents
// are taken with care: dot-files and dot-folders are left out (.git,
// .env.md), a symbolic link is followed only to a file inside the folder
// that is not a dot-file itself, and files are read through an os.Root of
// the folder, which refuses to leave it even if a link changes meanwhile.
// A file named on the command line is read as named.
func readDocFiles(args []string, title string) ([]docFile, error) {
	var files []docFile
	var problems []error
	for _, arg := range args {
		info, err := os.Stat(arg)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if !info.IsDir() {
			f, err := os.Open(arg)
			if err != nil {
				problems = append(problems, err)
				continue
			}
			body, err := readDocBody(arg, f)
			if err != nil {
				problems = append(problems, err)
				continue
			}
			files = append(files, docFile{path: arg, body: body})
			continue
		}
		found, errs := readDocFolder(arg)
		files = append(files, found...)
		problems = append(problems, errs...)
	}
	if title != "" && len(files)+len(problems) > 1 {
		return nil, errors.New("docs add: --title names one file's title")
	}
	for i := range files {
		f := &files[i]
		f.title = title
		if f.title == "" {
			f.title = docTitle(f.path, f.body)
		}
		f.title = strings.TrimSpace(f.title)
		if err := checkDocFile(*f); err != nil {
			problems = append(problems, err)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("docs add: nothing was added; refused:\n%w", errors.Join(problems...))
	}
	if len(files) == 0 {
		return nil, errors.New("docs add: name at least one file or folder (.md, .markdown or .txt files are read from a folder)")
	}
	return files, nil
}

// readDocFolder reads the Markdown and text files below dir.
func readDocFolder(dir string) ([]docFile, []error) {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, []error{err}
	}
	root, err := os.OpenRoot(resolved)
	if err != nil {
		return nil, []error{err}
	}
	defer root.Close()
	var files []docFile
	var problems []error
	err = filepath.WalkDir(resolved, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(resolved, path)
		if err != nil {
			return err
		}
		shown := filepath.Join(dir, rel)
		if rel != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !docExtension(path) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := filepath.EvalSymlinks(path)
			if err != nil {
				problems = append(problems, fmt.Errorf("%s: a symbolic link that leads nowhere", shown))
				return nil
			}
			in, err := filepath.Rel(resolved, target)
			switch {
			case err != nil || in == ".." || strings.HasPrefix(in, ".."+string(filepath.Separator)) || filepath.IsAbs(in):
				problems = append(problems, fmt.Errorf("%s: a symbolic link to %s, outside %s", shown, target, dir))
				return nil
			case hiddenPath(in):
				problems = append(problems, fmt.Errorf("%s: a symbolic link to the dot-file %s", shown, filepath.Join(dir, in)))
				return nil
			}
			if info, err := os.Stat(target); err == nil && info.IsDir() {
				return nil // a folder behind a link is not walked
			}
			// Read the file it leads to: os.Root follows no absolute link.
			rel = in
		}
		f, err := root.Open(rel)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", shown, err))
			return nil
		}
		body, err := readDocBody(shown, f)
		if err != nil {
			problems = append(problems, err)
			return nil
		}
		files = append(files, docFile{path: shown, body: body})
		return nil
	})
	if err != nil {
		problems = append(problems, err)
	}
	return files, problems
}

// readDocBody reads a regular file of at most admin.MaxBody bytes, and
// closes it.
func readDocBody(path string, f *os.File) (string, error) {
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, admin.MaxBody+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > admin.MaxBody {
		return "", fmt.Errorf("%s: over the limit of %d KiB a document", path, admin.MaxBody>>10)
	}
	return string(b), nil
}

func docExtension(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".md", ".markdown", ".txt":
		return true
	}
	return false
}

// hiddenPath reports whether a path relative to a folder passes through a
// dot-file or dot-folder.
func hiddenPath(rel string) bool {
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if strings.HasPrefix(part, ".") && part != "." {
			return true
		}
	}
	return false
}

// docTitle is a document's title: the first Markdown heading, else the
// file's name without its extension.
func docTitle(path, body string) string {
	for _, line := range strings.SplitN(body, "\n", 50) {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "# "); ok && strings.TrimSpace(t) != "" {
			return strings.TrimSpace(t)
		}
	}
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// checkDocFile applies what the server checks of a document, and what
// encoding/json would otherwise hide: invalid UTF-8 would reach the
// server as U+FFFD, text nobody wrote.
func checkDocFile(f docFile) error {
	if i := invalidUTF8(f.body); i >= 0 {
		return fmt.Errorf("%s: not valid UTF-8 (at byte %d); save it as UTF-8", f.path, i)
	}
	if i := strings.IndexByte(f.body, 0); i >= 0 {
		return fmt.Errorf("%s: a NUL character at byte %d", f.path, i)
	}
	if strings.TrimSpace(f.body) == "" {
		return fmt.Errorf("%s: empty", f.path)
	}
	switch {
	case !utf8.ValidString(f.title) || strings.IndexByte(f.title, 0) >= 0:
		return fmt.Errorf("%s: the title %q is not valid UTF-8 text", f.path, f.title)
	case !extension.Visible(f.title):
		return fmt.Errorf("%s: the title %q has no visible character (only spaces or invisible ones); give the file a heading or use --title", f.path, f.title)
	case len(f.title) > admin.MaxTitle:
		return fmt.Errorf("%s: a title of %d bytes, over the limit of %d", f.path, len(f.title), admin.MaxTitle)
	}
	return nil
}

// invalidUTF8 is the offset of the first byte of s that is not UTF-8, or -1.
func invalidUTF8(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return i
			}
		}
	}
	return -1
}
