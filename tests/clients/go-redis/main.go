// go-redis against a running strata-server, used as applications use it:
// TxPipelined (MULTI/EXEC), Watch with optimistic retries, pipelines,
// Script (EVALSHA with its EVAL fallback), FUNCTION LOAD + FCall, pub/sub
// and concurrent transfers between keys from several goroutines.
//
// Run by crates/strata-server/tests/client_libraries.rs with the server's
// port as the only argument. Each check exits non-zero on a wrong answer;
// the last line printed is "ok <number of checks>".
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

var checks int

func check(ok bool, what string, args ...any) {
	if !ok {
		fmt.Printf("FAILED: "+what+"\n", args...)
		os.Exit(1)
	}
	checks++
}

func must(err error, what string) {
	if err != nil {
		fmt.Printf("FAILED: %s: %v\n", what, err)
		os.Exit(1)
	}
}

func main() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + os.Args[1]})
	defer rdb.Close()
	must(rdb.FlushAll(ctx).Err(), "FLUSHALL")
	must(rdb.FunctionFlush(ctx).Err(), "FUNCTION FLUSH")

	// TxPipelined: MULTI ... EXEC, replies per command.
	var incr *redis.IntCmd
	_, err := rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, "a", 1, 0)
		incr = pipe.Incr(ctx, "a")
		pipe.IncrBy(ctx, "b", 5)
		return nil
	})
	must(err, "TxPipelined")
	check(incr.Val() == 2, "INCR inside TxPipelined gave %d", incr.Val())

	// A runtime error inside EXEC comes back for that command only.
	cmds, err := rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, "s", "text", 0)
		pipe.Incr(ctx, "s")
		pipe.Get(ctx, "s")
		return nil
	})
	check(err != nil, "the failing INCR is reported")
	check(len(cmds) == 3 && cmds[1].Err() != nil && cmds[2].(*redis.StringCmd).Val() == "text",
		"per-command errors in EXEC")

	// Watch: optimistic locking, retried when another client interferes.
	transfer := func(from, to string, amount int64) error {
		for attempt := 0; attempt < 100; attempt++ {
			err := rdb.Watch(ctx, func(tx *redis.Tx) error {
				balance, err := tx.Get(ctx, from).Int64()
				if err != nil && !errors.Is(err, redis.Nil) {
					return err
				}
				if balance < amount {
					return errors.New("insufficient funds")
				}
				_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
					pipe.DecrBy(ctx, from, amount)
					pipe.IncrBy(ctx, to, amount)
					return nil
				})
				return err
			}, from, to)
			if !errors.Is(err, redis.TxFailedErr) {
				return err
			}
		}
		return errors.New("too many retries")
	}
	accounts := []string{"acct:1", "acct:2", "acct:3", "acct:4"}
	for _, account := range accounts {
		must(rdb.Set(ctx, account, 1000, 0).Err(), "SET account")
	}
	var wg sync.WaitGroup
	var failures sync.Map
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for n := 0; n < 50; n++ {
				from := accounts[(g+n)%4]
				to := accounts[(g+n+1)%4]
				if err := transfer(from, to, 3); err != nil {
					failures.Store(g, err)
				}
			}
		}(g)
	}
	wg.Wait()
	failures.Range(func(key, value any) bool {
		check(false, "transfer failed: %v", value)
		return false
	})
	var total int64
	for _, account := range accounts {
		v, err := rdb.Get(ctx, account).Int64()
		must(err, "GET account")
		total += v
	}
	check(total == 4000, "WATCH transfers kept the total: %d", total)

	// A WATCH broken by another client fails with TxFailedErr.
	err = rdb.Watch(ctx, func(tx *redis.Tx) error {
		must(rdb.Set(ctx, "watched", "other", 0).Err(), "SET from outside")
		_, err := tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, "watched", "mine", 0)
			return nil
		})
		return err
	}, "watched")
	check(errors.Is(err, redis.TxFailedErr), "broken WATCH gives TxFailedErr, got %v", err)
	check(rdb.Get(ctx, "watched").Val() == "other", "the broken transaction did not apply")

	// Plain pipeline.
	pipeCmds, err := rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i := 0; i < 100; i++ {
			pipe.RPush(ctx, "list", i)
		}
		return nil
	})
	must(err, "Pipelined")
	check(len(pipeCmds) == 100 && rdb.LLen(ctx, "list").Val() == 100, "pipelined RPUSH")

	// Script: EVALSHA, falling back to EVAL after SCRIPT FLUSH.
	script := redis.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)
	v, err := script.Run(ctx, rdb, []string{"counter"}, 5).Int64()
	must(err, "Script.Run")
	check(v == 5, "script result %d", v)
	must(rdb.ScriptFlush(ctx).Err(), "SCRIPT FLUSH")
	v, err = script.Run(ctx, rdb, []string{"counter"}, 5).Int64()
	must(err, "Script.Run after SCRIPT FLUSH")
	check(v == 10, "script result after flush %d", v)

	// Functions: FUNCTION LOAD, FCALL, FCALL_RO.
	library := "#!lua name=golib\n" +
		"redis.register_function('double', function(keys, args) return redis.call('INCRBY', keys[1], redis.call('GET', keys[1])) end)\n" +
		"redis.register_function{function_name='peek', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}"
	name, err := rdb.FunctionLoadReplace(ctx, library).Result()
	must(err, "FUNCTION LOAD")
	check(name == "golib", "library name %q", name)
	v, err = rdb.FCall(ctx, "double", []string{"counter"}).Int64()
	must(err, "FCALL")
	check(v == 20, "FCALL result %d", v)
	peek, err := rdb.FCallRO(ctx, "peek", []string{"counter"}).Text()
	must(err, "FCALL_RO")
	check(peek == "20", "FCALL_RO result %q", peek)

	// Pub/sub.
	sub := rdb.Subscribe(ctx, "news")
	_, err = sub.Receive(ctx)
	must(err, "SUBSCRIBE")
	must(rdb.Publish(ctx, "news", "hello").Err(), "PUBLISH")
	select {
	case msg := <-sub.Channel():
		check(msg.Payload == "hello", "message %q", msg.Payload)
	case <-time.After(5 * time.Second):
		check(false, "no message received")
	}
	must(sub.Close(), "unsubscribe")

	fmt.Printf("ok %d\n", checks)
}
