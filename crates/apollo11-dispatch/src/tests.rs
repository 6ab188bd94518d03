use super::*;

fn hello(name: &str, labels: &[(&str, &str)]) -> Hello {
    Hello {
        name: name.to_owned(),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        slots: 4,
        version: "test".to_owned(),
    }
}

fn what(step: &str) -> TryRef {
    TryRef {
        run_id: "r1".to_owned(),
        step: step.to_owned(),
        attempt: 1,
        compensation: false,
    }
}

fn needs(labels: &[(&str, &str)]) -> Labels {
    hello("", labels).labels
}

fn config() -> Config {
    Config {
        heartbeat_timeout: Duration::from_secs(10),
        adopt_grace: Duration::from_secs(30),
        token_seed: None,
    }
}

const NOW: Duration = Duration::ZERO;

/// Whether nothing is waiting for the ticket now (or ever: its try is done with).
async fn quiet(ticket: &mut Ticket) -> bool {
    match tokio::time::timeout(Duration::ZERO, ticket.next()).await {
        Err(_) => true,
        Ok(TaskEvent::Lost { reason }) => reason.contains("let the try go"),
        Ok(_) => false,
    }
}

#[tokio::test(start_paused = true)]
async fn a_try_goes_only_to_a_worker_carrying_its_labels() {
    let d = Dispatcher::new(config());
    let mut ticket = d.submit(needs(&[("role", "db")]), what("s"), b"job".to_vec());
    let web = hello("web1", &[("role", "web")]);
    assert!(d.take(&web, 4, NOW).await.is_empty());
    assert_eq!(d.queued()[0].tries, 1);
    assert!(!d.queued()[0].matched);
    let db = hello("db1", &[("role", "db"), ("zone", "a")]);
    let offers = d.take(&db, 4, NOW).await;
    assert_eq!(offers.len(), 1);
    assert_eq!(offers[0].token, ticket.token());
    assert_eq!(&*offers[0].job, b"job");
    assert!(matches!(ticket.next().await, TaskEvent::Taken { worker } if worker == "db1"));
    assert!(d.queued().is_empty());
    assert_eq!(d.workers().iter().map(|w| w.running).sum::<u32>(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_worker_takes_no_more_than_its_free_slots_oldest_first() {
    let d = Dispatcher::new(config());
    let tickets: Vec<Ticket> = (0..3)
        .map(|i| d.submit(Labels::new(), what(&format!("s{i}")), Vec::new()))
        .collect();
    let w = hello("w", &[]);
    let offers = d.take(&w, 2, NOW).await;
    let steps: Vec<&str> = offers.iter().map(|o| o.what.step.as_str()).collect();
    assert_eq!(steps, ["s0", "s1"]);
    assert_eq!(d.take(&w, 0, NOW).await.len(), 0);
    assert_eq!(d.take(&w, 5, NOW).await.len(), 1);
    drop(tickets);
}

#[tokio::test(start_paused = true)]
async fn a_long_poll_wakes_when_a_try_is_queued() {
    let d = Dispatcher::new(config());
    let poller = d.clone();
    let poll = tokio::spawn(async move {
        poller
            .take(&hello("w", &[]), 1, Duration::from_secs(20))
            .await
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    let _ticket = d.submit(Labels::new(), what("s"), Vec::new());
    let offers = poll.await.unwrap();
    assert_eq!(offers.len(), 1);
    let empty = d.take(&hello("w", &[]), 1, Duration::from_secs(20)).await;
    assert!(
        empty.is_empty(),
        "a poll with nothing queued ends empty at its deadline"
    );
}

#[tokio::test(start_paused = true)]
async fn start_is_answered_by_the_engine_and_a_result_recorded_once() {
    let d = Dispatcher::new(config());
    let mut ticket = d.submit(Labels::new(), what("s"), Vec::new());
    let token = d.take(&hello("w", &[]), 1, NOW).await[0].token.clone();
    ticket.next().await;
    let worker = d.clone();
    let t = token.clone();
    let started =
        tokio::spawn(async move { worker.started("w", &t, "host".into(), "h".into()).await });
    match ticket.next().await {
        TaskEvent::Started { host, handle, ack } => {
            assert_eq!((host.as_str(), handle.as_str()), ("host", "h"));
            ack.send(Ok(())).unwrap();
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(started.await.unwrap(), Ok(()));
    let first = report(&d, &token, b"out");
    let recorder = finished(&mut ticket, b"out").await;
    let retried = report(&d, &token, b"out");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !first.is_finished(),
        "no answer before the result is recorded"
    );
    let w = hello("w", &[]);
    assert!(
        d.heartbeat(&w, std::slice::from_ref(&token)).is_empty(),
        "the worker keeps a result being recorded"
    );
    recorder.recorded();
    assert_eq!(first.await.unwrap(), Ok(()));
    assert_eq!(retried.await.unwrap(), Ok(()), "a retried report");
    assert!(quiet(&mut ticket).await, "the retry passed nothing on");
    assert_eq!(
        d.heartbeat(&w, std::slice::from_ref(&token)),
        vec![token.clone()],
        "a recorded result's try is let go"
    );
    let again = d.started("w", &token, "host".into(), "h".into()).await;
    assert!(matches!(again, Err(Refusal::Decided(_))));
}

#[tokio::test(start_paused = true)]
async fn a_start_the_engine_refuses_is_refused_to_the_worker() {
    let d = Dispatcher::new(config());
    let mut ticket = d.submit(Labels::new(), what("s"), Vec::new());
    let token = d.take(&hello("w", &[]), 1, NOW).await[0].token.clone();
    ticket.next().await;
    let worker = d.clone();
    let started =
        tokio::spawn(async move { worker.started("w", &token, "host".into(), "h".into()).await });
    if let TaskEvent::Started { ack, .. } = ticket.next().await {
        ack.send(Err("no longer current".into())).unwrap();
    }
    assert_eq!(
        started.await.unwrap(),
        Err(Refusal::Decided("no longer current".into()))
    );
}

#[tokio::test(start_paused = true)]
async fn a_withdrawn_try_is_stopped_at_the_next_heartbeat_and_its_result_refused() {
    let d = Dispatcher::new(config());
    let ticket = d.submit(Labels::new(), what("s"), Vec::new());
    let w = hello("w", &[]);
    let token = d.take(&w, 1, NOW).await[0].token.clone();
    drop(ticket);
    assert_eq!(
        d.heartbeat(&w, std::slice::from_ref(&token)),
        vec![token.clone()]
    );
    assert!(matches!(
        d.finish("w", &token, Vec::new()).await,
        Err(Refusal::Decided(_))
    ));
    assert!(
        d.heartbeat(&w, &[]).is_empty(),
        "forgotten once the worker let it go"
    );
    assert!(d.what("w", &token).is_none());
}

#[tokio::test(start_paused = true)]
async fn a_queued_try_withdrawn_leaves_the_queue() {
    let d = Dispatcher::new(config());
    drop(d.submit(Labels::new(), what("s"), Vec::new()));
    assert!(d.queued().is_empty());
    assert!(d.take(&hello("w", &[]), 1, NOW).await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_silent_worker_is_lost_with_its_tries_and_its_late_result_refused() {
    let d = Dispatcher::new(config());
    let mut ticket = d.submit(Labels::new(), what("s"), Vec::new());
    let w = hello("w", &[]);
    let token = d.take(&w, 1, NOW).await[0].token.clone();
    ticket.next().await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(d.heartbeat(&w, std::slice::from_ref(&token)).is_empty());
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(d.workers().len(), 1, "heard from 6 s ago: alive");
    tokio::time::sleep(Duration::from_secs(6)).await;
    match ticket.next().await {
        TaskEvent::Lost { reason } => assert!(reason.contains("`w`"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(d.lost_workers(), 1);
    assert!(d.workers().is_empty());
    assert!(matches!(
        d.finish("w", &token, Vec::new()).await,
        Err(Refusal::Decided(_))
    ));
    let healed = d.heartbeat(&w, std::slice::from_ref(&token));
    assert_eq!(
        healed,
        vec![token],
        "the healed worker stops the lost try at once"
    );
}

#[tokio::test(start_paused = true)]
async fn a_try_held_but_unknown_is_kept_for_adoption_then_stopped() {
    let d = Dispatcher::new(config());
    let w = hello("w", &[]);
    let old = "00old".to_owned();
    assert!(d.heartbeat(&w, std::slice::from_ref(&old)).is_empty());
    assert_eq!(d.finish("w", &old, Vec::new()).await, Err(Refusal::Unknown));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut ticket = d.adopt(&old, "w", what("s"));
    assert!(d.heartbeat(&w, std::slice::from_ref(&old)).is_empty());
    let answer = report(&d, &old, b"done");
    finished(&mut ticket, b"done").await.recorded();
    assert_eq!(answer.await.unwrap(), Ok(()));

    let stray = "00stray".to_owned();
    assert!(d.heartbeat(&w, std::slice::from_ref(&stray)).is_empty());
    tokio::time::sleep(Duration::from_secs(8)).await;
    d.heartbeat(&w, std::slice::from_ref(&stray));
    tokio::time::sleep(Duration::from_secs(8)).await;
    d.heartbeat(&w, std::slice::from_ref(&stray));
    tokio::time::sleep(Duration::from_secs(8)).await;
    d.heartbeat(&w, std::slice::from_ref(&stray));
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(d.heartbeat(&w, std::slice::from_ref(&stray)), vec![stray]);
}

#[tokio::test(start_paused = true)]
async fn an_adopted_try_whose_worker_never_reports_is_lost() {
    let d = Dispatcher::new(config());
    let mut ticket = d.adopt("00gone", "w", what("s"));
    match ticket.next().await {
        TaskEvent::Lost { reason } => assert!(reason.contains("heartbeat"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_report_from_another_worker_is_refused() {
    let d = Dispatcher::new(config());
    let _ticket = d.submit(Labels::new(), what("s"), Vec::new());
    let token = d.take(&hello("w", &[]), 1, NOW).await[0].token.clone();
    assert!(matches!(
        d.finish("x", &token, Vec::new()).await,
        Err(Refusal::Decided(_))
    ));
    assert_eq!(
        d.heartbeat(&hello("x", &[]), std::slice::from_ref(&token)),
        vec![token]
    );
}

#[test]
fn tokens_differ_across_dispatchers() {
    let a = state::State::new(None).token();
    let b = state::State::new(None).token();
    assert_ne!(a, b);
}

#[tokio::test(start_paused = true)]
async fn stopping_a_try_waits_for_the_worker_to_let_it_go() {
    let d = Dispatcher::new(config());
    let ticket = d.submit(Labels::new(), what("s"), Vec::new());
    let w = hello("w", &[]);
    let token = d.take(&w, 1, NOW).await[0].token.clone();
    let stopper = d.clone();
    let t = token.clone();
    let stop = tokio::spawn(async move { stopper.stop("w", &t).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        d.heartbeat(&w, std::slice::from_ref(&token)),
        vec![token.clone()]
    );
    assert!(!stop.is_finished(), "the worker still holds it");
    // It killed the try and reports it: refused, but what it says is kept for the stop.
    assert!(matches!(
        d.finish("w", &token, b"killed".to_vec()).await,
        Err(Refusal::Decided(_))
    ));
    assert!(d.heartbeat(&w, &[]).is_empty());
    assert_eq!(stop.await.unwrap(), Ok(Some(b"killed".to_vec())));
    assert!(matches!(
        d.finish("w", &token, Vec::new()).await,
        Err(Refusal::Decided(_))
    ));
    drop(ticket);
    let gone = d.stop("nobody", "00x").await;
    assert!(gone.unwrap_err().contains("not connected"));
}

#[tokio::test(start_paused = true)]
async fn a_worker_whose_heartbeats_stop_naming_a_try_loses_it() {
    let d = Dispatcher::new(config());
    let mut ticket = d.submit(Labels::new(), what("s"), Vec::new());
    let w = hello("w", &[]);
    let token = d.take(&w, 1, NOW).await[0].token.clone();
    ticket.next().await;
    assert!(
        d.heartbeat(&w, &[]).is_empty(),
        "one heartbeat may cross the answer"
    );
    assert!(d.heartbeat(&w, std::slice::from_ref(&token)).is_empty());
    assert!(d.heartbeat(&w, &[]).is_empty());
    assert!(quiet(&mut ticket).await, "not lost: named in between");
    d.heartbeat(&w, &[]);
    match ticket.next().await {
        TaskEvent::Lost { reason } => assert!(reason.contains("no longer holds"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        d.finish("w", &token, Vec::new()).await,
        Err(Refusal::Decided(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_poll_of_a_worker_declared_lost_while_it_waits_gets_nothing() {
    let d = Dispatcher::new(config());
    let poller = d.clone();
    let poll = tokio::spawn(async move {
        poller
            .take(&hello("w", &[]), 1, Duration::from_secs(30))
            .await
    });
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(
        d.lost_workers(),
        0,
        "a worker holding nothing is not counted lost"
    );
    assert!(d.workers().is_empty(), "silent past the timeout: gone");
    let mut ticket = d.submit(Labels::new(), what("s"), Vec::new());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(quiet(&mut ticket).await, "not offered to the stale poll");
    assert_eq!(d.queued()[0].tries, 1);
    assert!(poll.await.unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_gauges_count_workers_slots_and_queued_label_sets_bounded() {
    let d = Dispatcher::new(config());
    let hosts = metrics::QUEUED_SERIES_MAX + 2;
    let _tickets: Vec<Ticket> = (0..hosts)
        .map(|i| {
            d.submit(
                needs(&[("host", &format!("h{i:03}"))]),
                what("s"),
                Vec::new(),
            )
        })
        .chain([
            d.submit(
                needs(&[("role", "db"), ("zone", "a")]),
                what("t"),
                Vec::new(),
            ),
            d.submit(
                needs(&[("role", "db"), ("zone", "a")]),
                what("u"),
                Vec::new(),
            ),
        ])
        .collect();
    let db = hello("db1", &[("role", "db"), ("zone", "a")]);
    assert_eq!(d.take(&db, 1, NOW).await.len(), 1);
    d.heartbeat(&hello("idle", &[("role", "web")]), &[]);
    let _adopted = d.adopt("feed", "gone", what("v"));
    let gauges = metrics::gauges(&d.workers(), &d.queued());
    assert_eq!((gauges.connected, gauges.slots, gauges.busy), (2, 8, 2));
    let series = |needs: &str, matched: bool| {
        let found = gauges.queued.iter();
        let found = found.filter(|q| q.needs == needs && q.matched == matched);
        found.map(|q| q.tries).collect::<Vec<u32>>()
    };
    assert_eq!(gauges.queued.len(), metrics::QUEUED_SERIES_MAX + 2);
    assert_eq!(series("host=h000", false), [1], "unmatched sets come first");
    assert_eq!(series("host=h050", false), [] as [u32; 0], "past the bound");
    assert_eq!(series(metrics::NEEDS_OTHER, false), [2]);
    assert_eq!(series(metrics::NEEDS_OTHER, true), [1], "role=db,zone=a");
    let lumped: u32 = gauges.queued.iter().map(|q| q.tries).sum();
    assert_eq!(lumped as usize, hosts + 1);
}

#[tokio::test(start_paused = true)]
async fn a_result_the_engine_lets_go_unrecorded_is_reported_again() {
    let d = Dispatcher::new(config());
    let mut ticket = d.submit(Labels::new(), what("s"), Vec::new());
    let token = d.take(&hello("w", &[]), 1, NOW).await[0].token.clone();
    ticket.next().await;
    let answer = report(&d, &token, b"out");
    drop(finished(&mut ticket, b"out").await);
    assert!(matches!(
        answer.await.unwrap(),
        Err(Refusal::NotRecorded(_))
    ));
    let slow = report(&d, &token, b"out");
    assert!(
        matches!(slow.await.unwrap(), Err(Refusal::NotRecorded(_))),
        "the report again waits for the same record, which never comes"
    );
}

/// A worker's report of `token`'s result, answered in a task.
fn report(
    d: &Dispatcher,
    token: &str,
    body: &[u8],
) -> tokio::task::JoinHandle<Result<(), Refusal>> {
    let (d, token, body) = (d.clone(), token.to_owned(), body.to_vec());
    tokio::spawn(async move { d.finish("w", &token, body).await })
}

/// The result `ticket` gets, checked to be `body`, and what records it.
async fn finished(ticket: &mut Ticket, body: &[u8]) -> Recorder {
    match ticket.next().await {
        TaskEvent::Finished { outcome, recorder } => {
            assert_eq!(outcome, body);
            recorder
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_seed_gives_the_same_tokens_every_time() {
    let a = state::State::new(Some(7)).token();
    let b = state::State::new(Some(7)).token();
    assert_eq!(a, b);
    assert_ne!(a, state::State::new(Some(8)).token());
}

#[tokio::test(start_paused = true)]
async fn a_worker_takes_what_fits_past_a_queue_it_cannot_take_oldest_first() {
    let d = Dispatcher::new(config());
    let db = Labels::from([("role".to_owned(), "db".to_owned())]);
    let _held: Vec<Ticket> = (0..5)
        .map(|i| d.submit(db.clone(), what(&format!("db{i}")), Vec::new()))
        .collect();
    let _fits: Vec<Ticket> = (0..3)
        .map(|i| d.submit(Labels::new(), what(&format!("any{i}")), Vec::new()))
        .collect();
    let taken = d.take(&hello("web", &[]), 2, NOW).await;
    let steps: Vec<&str> = taken.iter().map(|o| o.what.step.as_str()).collect();
    assert_eq!(steps, ["any0", "any1"]);
    let rest = d.take(&hello("db", &[("role", "db")]), 10, NOW).await;
    let steps: Vec<&str> = rest.iter().map(|o| o.what.step.as_str()).collect();
    assert_eq!(steps, ["db0", "db1", "db2", "db3", "db4", "any2"]);
}

#[tokio::test(start_paused = true)]
async fn an_adopted_try_adopted_again_is_lost_only_after_two_heartbeats_without_it() {
    let d = Dispatcher::new(config());
    let w = hello("w", &[]);
    let mut first = d.adopt("t1", "w", what("s"));
    drop(first);
    first = d.adopt("t1", "w", what("s"));
    assert!(d.heartbeat(&w, &[]).is_empty());
    assert!(
        tokio::time::timeout(Duration::from_millis(1), first.next())
            .await
            .is_err(),
        "one heartbeat without the try does not lose it"
    );
    d.heartbeat(&w, &[]);
    assert!(matches!(first.next().await, TaskEvent::Lost { .. }));
}
