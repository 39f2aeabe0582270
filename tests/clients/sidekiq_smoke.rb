# Sidekiq against a running strata-server, used as applications use it:
# jobs pushed one by one, in bulk and scheduled for later, a `sidekiq`
# process (the real CLI, three threads) that runs them, a job that fails
# and waits in the retry set, the statistics and the process list its
# Web UI shows, and its start-up check of the eviction policy (with
# Strata's defaults it must not warn that Redis "will evict Sidekiq data").
#
# Run by crates/strata-server/tests/client_libraries.rs as
# `ruby sidekiq_smoke.rb PORT`, Sidekiq's log going to
# $SIDEKIQ_SMOKE_DIR (a fresh directory otherwise), with Debian's ruby-sidekiq
# (Sidekiq 6.4). Each check exits non-zero with "FAILED: ..." on a wrong
# answer; the last line printed is "ok <number of checks>". A watchdog
# ends the program after 90 s.
require "set"
require "tmpdir"

port = ARGV.fetch(0)
workdir = ENV.fetch("SIDEKIQ_SMOKE_DIR") { Dir.mktmpdir }
ENV["REDIS_URL"] = "redis://127.0.0.1:#{port}/0"
require_relative "sidekiq_smoke_jobs"
require "sidekiq/api"

$checks = 0
$sidekiq = nil

# Ends the program, and the sidekiq process it started.
def fail!(what)
  puts "FAILED: #{what}"
  $stdout.flush
  Process.kill("KILL", $sidekiq) if $sidekiq
  exit!(1)
end

def check(condition, what)
  fail!(what) unless condition
  $checks += 1
end

Thread.new do
  sleep 90
  fail!("timed out after 90 s with #{$checks} checks done")
end

def wait_for(what, seconds)
  deadline = Time.now + seconds
  until yield
    fail!("waited #{seconds} s for #{what}") if Time.now >= deadline
    sleep 0.1
  end
  $checks += 1
end

Sidekiq.redis(&:flushall)
20.times { |i| SmokeJob.perform_async(i, "plain") }
pushed = Sidekiq::Client.push_bulk("class" => SmokeJob, "args" => (0...30).map { |i| [i, "bulk"] })
check(pushed.size == 30, "push_bulk answered #{pushed.size} job ids")
SmokeJob.perform_in(1, 0, "scheduled")
FailingJob.perform_async(7)
queued = Sidekiq::Queue.new("smoke").size
check(queued == 51, "51 jobs queued before a worker runs: #{queued}")
check(Sidekiq::ScheduledSet.new.size == 1, "one job scheduled")
check(Sidekiq::Queue.all.map(&:name) == ["smoke"], "the queue list")

log = File.join(workdir, "sidekiq.log")
jobs_file = File.expand_path("sidekiq_smoke_jobs.rb", __dir__)
pid = $sidekiq = spawn({ "REDIS_URL" => ENV["REDIS_URL"] }, "sidekiq", "-r", jobs_file, "-c", "3",
                       "-q", "smoke", out: log, err: log)
done = -> { Sidekiq.redis { |redis| redis.lrange("smoke:done", 0, -1) } }
wait_for("51 jobs run", 60) { done.call.size >= 51 }
wait_for("the failing job in the retry set", 30) { Sidekiq::RetrySet.new.size == 1 }
expected = (0...20).map { |i| "plain:#{i}" } + (0...30).map { |i| "bulk:#{i}" } + ["scheduled:0"]
check(done.call.to_set == expected.to_set && done.call.size == 51, "every job ran once: #{done.call.size}")
check(Sidekiq::Queue.new("smoke").size.zero?, "the queue is empty")
check(Sidekiq::ScheduledSet.new.size.zero?, "the scheduled job left its set")
retry_entry = Sidekiq::RetrySet.new.first
check(retry_entry.klass == "FailingJob", "the retry is FailingJob's")
check(retry_entry["error_message"] == "deliberate failure 7", "the retry keeps its error")
check(retry_entry["retry_count"].zero?, "first retry pending")
# The counters are written with the process's heartbeat (every 5 s).
wait_for("the statistics", 15) { Sidekiq::Stats.new.processed >= 52 }
check(Sidekiq::Stats.new.failed >= 1, "failed #{Sidekiq::Stats.new.failed}")
wait_for("the process's heartbeat", 15) { Sidekiq::ProcessSet.new.size == 1 }
check(Sidekiq::ProcessSet.new.first["concurrency"] == 3, "the process list shows its threads")

Process.kill("TERM", pid)
deadline = Time.now + 30
until Process.wait(pid, Process::WNOHANG)
  fail!("sidekiq did not stop within 30 s of TERM") if Time.now >= deadline
  sleep 0.1
end
$sidekiq = nil
check($?.success?, "sidekiq exited cleanly: #{$?.inspect}")
wait_for("the process list emptied", 10) { Sidekiq::ProcessSet.new.size.zero? }
text = File.read(log)
check(text.include?("Running in"), "sidekiq's log shows its start")
check(!text.include?("will evict Sidekiq data"), "no eviction warning with the default policy:\n#{text}")
puts "ok #{$checks}"
