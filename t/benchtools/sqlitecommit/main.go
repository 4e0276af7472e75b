// Command sqlitecommit is make bench's floor for a durable write: it
// times one-row transactions committed with the settings of cbth's store
// (WAL, synchronous=FULL, BEGIN IMMEDIATE) and prints the median.
//
//	sqlitecommit DB N
package main

import (
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	_ "github.com/mattn/go-sqlite3"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: sqlitecommit DB N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[2])
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "sqlitecommit: N must be a positive number")
		os.Exit(2)
	}
	db, err := sql.Open("sqlite3", "file:"+os.Args[1]+"?_journal_mode=WAL&_synchronous=FULL&_txlock=immediate")
	if err != nil {
		fail(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		fail(err)
	}
	ds := make([]time.Duration, n)
	for i := range ds {
		start := time.Now()
		tx, err := db.Begin()
		if err == nil {
			_, err = tx.Exec(`INSERT INTO t(v) VALUES (?)`, strconv.Itoa(i))
		}
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			fail(err)
		}
		ds[i] = time.Since(start)
	}
	slices.Sort(ds)
	fmt.Println(ds[n/2])
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sqlitecommit:", err)
	os.Exit(1)
}
