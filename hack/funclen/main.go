// Command funclen fails when a function outside tests is longer than -max
// lines (make verify): a long function is split where it has parts, so each
// reads on one screen. Generated files (zz_generated*) are not counted.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strings"
)

func main() {
	limit := flag.Int("max", 80, "the most lines a function may have")
	flag.Parse()
	type long struct {
		where string
		lines int
	}
	var found []long
	fs := token.NewFileSet()
	for _, path := range flag.Args() {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "zz_generated") {
			continue
		}
		f, err := parser.ParseFile(fs, path, nil, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(2)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fs.Position(fd.Pos()), fs.Position(fd.End())
			if n := end.Line - start.Line + 1; n > *limit {
				found = append(found, long{fmt.Sprintf("%s:%d %s", path, start.Line, fd.Name.Name), n})
			}
		}
	}
	if len(found) == 0 {
		return
	}
	sort.Slice(found, func(i, j int) bool { return found[i].lines > found[j].lines })
	fmt.Fprintf(os.Stderr, "functions over %d lines (split them where they have parts):\n", *limit)
	for _, l := range found {
		fmt.Fprintf(os.Stderr, "  %4d %s\n", l.lines, l.where)
	}
	os.Exit(1)
}
