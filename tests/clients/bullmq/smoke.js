// BullMQ against a running strata-server, used as applications use it: a
// Queue adds plain, delayed, retried, failing and scheduled (repeatable)
// jobs, a Worker processes them and QueueEvents follows the events stream
// (XREAD BLOCK) for 'completed', 'failed' and 'progress'. Under the hood
// that is Lua scripts (EVALSHA) over lists, sorted sets, hashes and
// streams, BRPOPLPUSH/BZPOPMIN-style blocking and MULTI/EXEC.
//
// Run by crates/strata-server/tests/client_libraries.rs with the server's
// port as the only argument. Each check exits non-zero on a wrong answer;
// the last line printed is "ok <number of checks>". Every wait is bounded.
"use strict";

const { Queue, Worker, QueueEvents } = require("bullmq");

const port = Number(process.argv[2]);
const connection = { host: "127.0.0.1", port, maxRetriesPerRequest: null };
const WAIT_MS = 20000;
let checks = 0;

function check(ok, what) {
  if (!ok) {
    console.log("FAILED: " + what);
    process.exit(1);
  }
  checks += 1;
}

// The whole program may not take longer than this, whatever hangs.
const watchdog = setTimeout(() => {
  console.log("FAILED: timed out after 60 s with " + checks + " checks done");
  process.exit(1);
}, 60000);

function within(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error("timed out waiting for " + what)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function main() {
  const name = "smoke";
  const queue = new Queue(name, { connection });
  const client = await queue.client;
  await client.flushall();

  // Read the events stream from its start, so that no event is missed.
  const events = new QueueEvents(name, { connection, lastEventId: "0-0" });
  await within(events.waitUntilReady(), WAIT_MS, "QueueEvents ready");
  const completed = new Map();
  const failed = new Map();
  const progress = [];
  const eventWaiters = [];
  function notify() {
    for (const waiter of eventWaiters.slice()) waiter();
  }
  events.on("completed", ({ jobId, returnvalue }) => {
    completed.set(jobId, returnvalue);
    notify();
  });
  events.on("failed", ({ jobId, failedReason }) => {
    failed.set(jobId, failedReason);
    notify();
  });
  events.on("progress", ({ jobId, data }) => {
    progress.push([jobId, data]);
    notify();
  });
  function until(predicate, what) {
    return within(new Promise((resolve) => {
      const test = () => {
        if (predicate()) {
          eventWaiters.splice(eventWaiters.indexOf(test), 1);
          resolve();
        }
      };
      eventWaiters.push(test);
      test();
    }), WAIT_MS, what);
  }

  // Jobs added before any worker runs wait in the queue.
  const plain = [];
  for (let i = 1; i <= 3; i += 1) {
    plain.push(await queue.add("add", { a: i, b: 10 * i }));
  }
  const delayedAt = Date.now();
  const delayed = await queue.add("add", { a: 100, b: 200 }, { delay: 300 });
  const retried = await queue.add("flaky", { value: 7 }, { attempts: 3, backoff: { type: "fixed", delay: 100 } });
  const broken = await queue.add("broken", {}, { attempts: 1 });
  const progressed = await queue.add("progress", {});

  check((await plain[0].getState()) === "waiting", "a job added before any worker is waiting");
  check((await delayed.getState()) === "delayed", "a delayed job is delayed");
  const waitingCounts = await queue.getJobCounts("waiting", "delayed");
  check(waitingCounts.waiting === 6 && waitingCounts.delayed === 1,
    "counts before the worker " + JSON.stringify(waitingCounts));

  const workerFailures = [];
  const worker = new Worker(name, async (job) => {
    switch (job.name) {
      case "add":
        return job.data.a + job.data.b;
      case "flaky":
        if (job.attemptsMade === 0) throw new Error("first attempt fails");
        return { value: job.data.value * 6, attempt: job.attemptsMade + 1 };
      case "broken":
        throw new Error("always broken");
      case "progress":
        await job.updateProgress(50);
        await job.updateProgress(100);
        return "done";
      case "tick":
        return "tock " + job.data.n;
      default:
        throw new Error("unknown job " + job.name);
    }
  }, { connection, concurrency: 2 });
  worker.on("failed", (job, error) => workerFailures.push([job && job.id, error.message]));
  worker.on("error", (error) => console.log("worker error: " + error));
  await within(worker.waitUntilReady(), WAIT_MS, "Worker ready");

  // Return values, through Job.waitUntilFinished (QueueEvents) and
  // through the 'completed' events themselves.
  for (let i = 0; i < plain.length; i += 1) {
    const value = await plain[i].waitUntilFinished(events, WAIT_MS);
    check(value === 11 * (i + 1), "plain job " + i + " returned " + value);
  }
  check((await delayed.waitUntilFinished(events, WAIT_MS)) === 300, "the delayed job's return value");
  const flaky = await retried.waitUntilFinished(events, WAIT_MS);
  check(flaky && flaky.value === 42 && flaky.attempt === 2, "the retried job's return value " + JSON.stringify(flaky));
  check((await progressed.waitUntilFinished(events, WAIT_MS)) === "done", "the progress job's return value");

  let brokenError = null;
  try {
    await broken.waitUntilFinished(events, WAIT_MS);
  } catch (error) {
    brokenError = error;
  }
  check(brokenError !== null && /always broken/.test(brokenError.message),
    "waitUntilFinished rejects for a failed job: " + brokenError);

  await until(() => [...plain, delayed, retried, progressed].every((job) => completed.has(job.id)),
    "'completed' events for every job");
  check(String(completed.get(plain[2].id)) === "33", "the 'completed' event carries the return value");
  await until(() => failed.has(broken.id), "'failed' event for the broken job");
  check(/always broken/.test(failed.get(broken.id)), "the 'failed' event carries the reason");
  await until(() => progress.filter(([id]) => id === progressed.id).length === 2, "two 'progress' events");
  check(JSON.stringify(progress.filter(([id]) => id === progressed.id).map(([, data]) => data)) === "[50,100]",
    "progress events in order");

  // What the stored jobs say.
  const doneDelayed = await queue.getJob(delayed.id);
  check(doneDelayed.finishedOn - delayedAt >= 300, "the delayed job ran no sooner than 300 ms later");
  check(doneDelayed.returnvalue === 300, "the stored return value");
  const doneRetried = await queue.getJob(retried.id);
  check(doneRetried.attemptsMade === 2, "the retried job made 2 attempts, not " + doneRetried.attemptsMade);
  check((await doneRetried.getState()) === "completed", "the retried job is completed");
  check(workerFailures.some(([id, message]) => id === retried.id && message === "first attempt fails"),
    "the worker saw the first attempt fail");
  const doneBroken = await queue.getJob(broken.id);
  check((await doneBroken.getState()) === "failed", "the broken job is failed");
  check(doneBroken.attemptsMade === 1 && doneBroken.failedReason === "always broken",
    "the broken job's attempts and reason " + doneBroken.attemptsMade + " " + doneBroken.failedReason);
  const progressJob = await queue.getJob(progressed.id);
  check(progressJob.progress === 100, "the stored progress");

  // A job scheduler (repeatable job) every 200 ms, until it ran twice.
  await queue.upsertJobScheduler("ticker", { every: 200 }, { name: "tick", data: { n: 1 } });
  const schedulers = await queue.getJobSchedulers();
  check(schedulers.length === 1 && schedulers[0].key === "ticker", "getJobSchedulers " + JSON.stringify(schedulers));
  await within((async () => {
    for (;;) {
      const ticks = (await queue.getJobs(["completed"])).filter((job) => job.name === "tick");
      if (ticks.length >= 2) return ticks;
      await sleep(50);
    }
  })(), WAIT_MS, "two scheduled jobs");
  check((await queue.removeJobScheduler("ticker")) === true, "removeJobScheduler");
  check((await queue.getJobSchedulers()).length === 0, "no scheduler left");
  // Let a scheduled job that was already queued finish before counting.
  await within((async () => {
    for (;;) {
      const counts = await queue.getJobCounts("waiting", "active", "delayed");
      if (counts.waiting + counts.active + counts.delayed === 0) return;
      await sleep(50);
    }
  })(), WAIT_MS, "the queue to drain");
  const ticks = (await queue.getJobs(["completed"])).filter((job) => job.name === "tick");
  check(ticks.length >= 2 && ticks.every((job) => job.returnvalue === "tock 1"), "scheduled jobs' return values");

  const counts = await queue.getJobCounts("completed", "failed", "waiting", "active", "delayed");
  check(counts.completed === 6 + ticks.length && counts.failed === 1 &&
    counts.waiting === 0 && counts.active === 0 && counts.delayed === 0,
    "final job counts " + JSON.stringify(counts));
  const completedIds = (await queue.getCompleted(0, -1)).map((job) => job.id).sort();
  check(completedIds.length === counts.completed, "getCompleted lists every completed job");

  await within(worker.close(), WAIT_MS, "Worker close");
  await within(events.close(), WAIT_MS, "QueueEvents close");
  await within(queue.close(), WAIT_MS, "Queue close");
  clearTimeout(watchdog);
  console.log("ok " + checks);
}

main().catch((error) => {
  console.log("FAILED: " + (error && error.stack ? error.stack : error));
  process.exit(1);
});
