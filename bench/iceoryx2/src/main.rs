//! iceoryx2 peer of zimp_bench: one publisher, N subscriber processes
//! (this program started again with `--role sub`), zero-copy loans of
//! `[u8]` slices, subscribers polling (spin, or yield when there are more
//! processes than cores), or, with `--events`, event-based: the publisher
//! notifies an iceoryx2 event service after every send and subscribers
//! that find nothing sleep on its listener, as iceoryx2's users wait without
//! burning a core. Every message is sequence-checked with the format
//! of bench/msg.h; a zero-length sample ends a run. Prints zimp_bench's
//! external-program lines:
//!   stream,<mech>,<N>,<size>,<msgs/s>,<min msgs/s>,0,<send p50 ns>,ok
//!   pingpong,<mech>,64,<p50>,<p99>,<p99.9>,<max>,<mean>,<samples>,ok
//! where <mech> is iceoryx2 (polling) or iceoryx2-event.
use iceoryx2::port::listener::Listener;
use iceoryx2::port::notifier::Notifier;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::prelude::*;
use iceoryx2::sample::Sample;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TAIL_KEY: u64 = 0x5a17c0de9e3779b9;

fn tail_start(len: usize) -> usize {
    if len >= 16 {
        len - 8
    } else if len > 8 {
        len - 1
    } else {
        len
    }
}

fn pat(seq: u64, i: usize) -> u8 {
    (seq.wrapping_mul(0x9d).wrapping_add((i as u64).wrapping_mul(7)).wrapping_add(1)) as u8
}

fn msg_write(p: &mut [u8], seq: u64, full: bool) {
    let len = p.len();
    let h = len.min(8);
    let t = tail_start(len);
    p[..h].copy_from_slice(&seq.to_le_bytes()[..h]);
    if full {
        for i in h..t {
            p[i] = pat(seq, i);
        }
    }
    if len >= 16 {
        p[t..t + 8].copy_from_slice(&(seq ^ TAIL_KEY).to_le_bytes());
    } else if len > 8 {
        p[t] = seq.wrapping_mul(31).wrapping_add(7) as u8;
    }
}

fn msg_check(p: &[u8], seq: u64, full: bool) -> bool {
    let len = p.len();
    let h = len.min(8);
    let t = tail_start(len);
    if p[..h] != seq.to_le_bytes()[..h] {
        return false;
    }
    if len >= 16 && p[t..t + 8] != (seq ^ TAIL_KEY).to_le_bytes() {
        return false;
    }
    if len > 8 && len < 16 && p[t] != seq.wrapping_mul(31).wrapping_add(7) as u8 {
        return false;
    }
    !full || (h..t).all(|i| p[i] == pat(seq, i))
}

struct Opts {
    nrecv: usize,
    seconds: f64,
    sizes: Vec<usize>,
    full: bool,
    role_sub: bool,
    events: bool,
    tag: String,
}

impl Opts {
    fn mech(&self) -> &'static str {
        if self.events { "iceoryx2-event" } else { "iceoryx2" }
    }
}

fn parse() -> Opts {
    let mut o = Opts {
        nrecv: 1,
        seconds: 0.1,
        sizes: vec![1, 64, 4096],
        full: false,
        role_sub: false,
        events: false,
        tag: std::process::id().to_string(),
    };
    let a: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < a.len() {
        let v = a.get(i + 1).cloned().unwrap_or_default();
        match a[i].as_str() {
            "--nrecv" => { o.nrecv = v.parse().unwrap_or(1); i += 1; }
            "--seconds" => { o.seconds = v.parse().unwrap_or(0.1); i += 1; }
            "--sizes" => { o.sizes = v.split(',').filter_map(|s| s.parse().ok()).collect(); i += 1; }
            "--tag" => { o.tag = v; i += 1; }
            "--check" => o.full = true,
            "--events" => o.events = true,
            "--role" => { o.role_sub = v == "sub"; i += 1; }
            _ => {}
        }
        i += 1;
    }
    o
}

fn ncpu() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

fn relax(yield_cpu: bool) {
    if yield_cpu {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

fn svc_name(tag: &str, what: &str) -> ServiceName {
    format!("zimp-bench/{}/{}", tag, what).as_str().try_into().expect("service name")
}

fn buffer_for(size: usize) -> usize {
    ((32usize << 20) / size.max(64)).clamp(4, 256)
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The event side of a service in `--events` mode: the publisher's notifier
/// or a subscriber's listener (the service `<what>-ev` beside `<what>`).
enum Wake {
    Poll(bool),                        // no events: spin, or yield when oversubscribed
    Listen(Listener<ipc::Service>),
    Notify(Notifier<ipc::Service>),
    None,
}

fn event_service(node: &Node<ipc::Service>, o: &Opts, what: &str) -> Res<PortFactoryEvent> {
    let name = svc_name(&o.tag, &format!("{}-ev", what));
    let t0 = Instant::now();
    loop {
        match node.service_builder(&name).event().max_listeners(o.nrecv.max(1)).max_notifiers(2).open_or_create() {
            Ok(e) => return Ok(e),
            Err(_) if t0.elapsed() < Duration::from_secs(20) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => return Err(format!("event service {:?}", e).into()),
        }
    }
}

type PortFactoryEvent = iceoryx2::service::port_factory::event::PortFactory<ipc::Service>;

fn listener(node: &Node<ipc::Service>, o: &Opts, what: &str) -> Res<Wake> {
    if !o.events {
        return Ok(Wake::Poll(o.nrecv + 1 > ncpu()));
    }
    Ok(Wake::Listen(event_service(node, o, what)?.listener_builder().create()?))
}

fn notifier(node: &Node<ipc::Service>, o: &Opts, what: &str) -> Res<Wake> {
    if !o.events {
        return Ok(Wake::None);
    }
    Ok(Wake::Notify(event_service(node, o, what)?.notifier_builder().create()?))
}

impl Wake {
    /// Nothing to receive: spin, yield, or sleep until notified (a notification
    /// sent since the last wait is kept, so none is lost).
    fn idle(&self) -> Res<()> {
        match self {
            Wake::Poll(y) => relax(*y),
            Wake::Listen(l) => {
                l.timed_wait(|_| {}, Duration::from_millis(100))?;
            }
            _ => std::hint::spin_loop(),
        }
        Ok(())
    }

    /// A sample was sent: wake the listeners.
    fn sent(&self) -> Res<()> {
        if let Wake::Notify(n) = self {
            n.notify()?;
        }
        Ok(())
    }
}

fn receive_one(sub: &Subscriber<ipc::Service, [u8], ()>, wake: &Wake) -> Res<Sample<ipc::Service, [u8], ()>> {
    loop {
        if let Some(s) = sub.receive()? {
            return Ok(s);
        }
        wake.idle()?;
    }
}

fn subscriber_main(o: &Opts) -> Res<()> {
    let node = NodeBuilder::new().create::<ipc::Service>()?;
    let out = std::io::stdout();
    for &size in &o.sizes {
        let name = svc_name(&o.tag, &size.to_string());
        let t0 = Instant::now();
        let service = loop {
            match node.service_builder(&name).publish_subscribe::<[u8]>().open() {
                Ok(s) => break s,
                Err(_) if t0.elapsed() < Duration::from_secs(20) => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => return Err(format!("open {:?}", e).into()),
            }
        };
        let sub = service.subscriber_builder().create()?;
        let wake = listener(&node, o, &size.to_string())?;
        let (mut count, mut bad) = (0u64, 0u64);
        let mut first: Option<Instant> = None;
        loop {
            let s = receive_one(&sub, &wake)?;
            let p = s.payload();
            if p.is_empty() {
                break;
            }
            if first.is_none() {
                first = Some(Instant::now());
            }
            if p.len() != size || !msg_check(p, count, o.full) {
                bad += 1;
            }
            count += 1;
        }
        // rate over messages 2..count, timed from the first arrival
        let secs = first.map(|f| f.elapsed().as_secs_f64()).unwrap_or(0.0);
        writeln!(out.lock(), "res {} {} {} {}", size, count, secs, bad)?;
        out.lock().flush()?;
    }
    if o.nrecv == 1 {
        let ping = loop {
            if let Ok(s) = node.service_builder(&svc_name(&o.tag, "ping")).publish_subscribe::<[u8]>().open() {
                break s;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let sub = ping.subscriber_builder().create()?;
        let wake = listener(&node, o, "ping")?;
        let pong = node
            .service_builder(&svc_name(&o.tag, "pong"))
            .publish_subscribe::<[u8]>()
            .max_subscribers(1)
            .history_size(0)
            .subscriber_max_buffer_size(4)
            .enable_safe_overflow(false)
            .create()?;
        let publ = pong
            .publisher_builder()
            .initial_max_slice_len(64)
            .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
            .create()?;
        let notify = notifier(&node, o, "pong")?;
        while pong.dynamic_config().number_of_subscribers() < 1 {
            std::thread::sleep(Duration::from_micros(200));
        }
        writeln!(out.lock(), "ready")?;
        out.lock().flush()?;
        loop {
            let s = receive_one(&sub, &wake)?;
            let len = s.payload().len();
            if len == 0 {
                break;
            }
            let mut m = publ.loan_slice_uninit(len)?;
            let dst = m.payload_mut();
            for (d, b) in dst.iter_mut().zip(s.payload()) {
                d.write(*b);
            }
            drop(s);
            unsafe { m.assume_init() }.send()?;
            notify.sent()?;
        }
    }
    Ok(())
}

fn publisher_main(o: &Opts) -> Res<()> {
    let node = NodeBuilder::new().create::<ipc::Service>()?;
    let exe = std::env::current_exe()?;
    let sizes: Vec<String> = o.sizes.iter().map(|s| s.to_string()).collect();
    let mut kids = Vec::new();
    for _ in 0..o.nrecv {
        let mut c = Command::new(&exe);
        c.args(["--role", "sub", "--tag", &o.tag, "--nrecv", &o.nrecv.to_string(), "--sizes", &sizes.join(",")]);
        if o.full {
            c.arg("--check");
        }
        if o.events {
            c.arg("--events");
        }
        kids.push(c.stdout(Stdio::piped()).spawn()?);
    }
    let mut readers: Vec<_> = kids.iter_mut().map(|k| BufReader::new(k.stdout.take().unwrap())).collect();
    for &size in &o.sizes {
        let service = node
            .service_builder(&svc_name(&o.tag, &size.to_string()))
            .publish_subscribe::<[u8]>()
            .max_subscribers(o.nrecv)
            .max_publishers(1)
            .history_size(0)
            .subscriber_max_buffer_size(buffer_for(size))
            .enable_safe_overflow(false)
            .create()?;
        let publ = service
            .publisher_builder()
            .initial_max_slice_len(size.max(1))
            .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
            .create()?;
        let notify = notifier(&node, o, &size.to_string())?;
        let t0 = Instant::now();
        while service.dynamic_config().number_of_subscribers() < o.nrecv {
            if t0.elapsed() > Duration::from_secs(30) {
                return Err("subscribers did not connect".into());
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let start = Instant::now();
        let mut seq = 0u64;
        let mut samples: Vec<u64> = Vec::with_capacity(1 << 16);
        loop {
            let timed = seq & 15 == 0;
            let t = Instant::now();
            let mut m = publ.loan_slice_uninit(size)?;
            let p = m.payload_mut();
            // SAFETY: u8 has no invalid bit patterns; every byte read by
            // receivers is written by msg_write (header, tail, and the
            // pattern in between when checking).
            let bytes = unsafe { &mut *(p as *mut [std::mem::MaybeUninit<u8>] as *mut [u8]) };
            msg_write(bytes, seq, o.full);
            unsafe { m.assume_init() }.send()?;
            notify.sent()?;
            seq += 1;
            if timed {
                if samples.len() < (1 << 16) {
                    samples.push(t.elapsed().as_nanos() as u64);
                }
                if start.elapsed().as_secs_f64() >= o.seconds {
                    break;
                }
            }
        }
        let stop = publ.loan_slice_uninit(0)?;
        unsafe { stop.assume_init() }.send()?;
        notify.sent()?;
        let (mut sum, mut min, mut bad) = (0.0f64, f64::INFINITY, 0u64);
        for r in readers.iter_mut() {
            let mut line = String::new();
            r.read_line(&mut line)?;
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() != 5 || f[0] != "res" {
                return Err(format!("subscriber said {:?}", line).into());
            }
            let count: f64 = f[2].parse()?;
            let secs: f64 = f[3].parse()?;
            bad += f[4].parse::<u64>()?;
            if count as u64 != seq {
                bad += 1;
            }
            let rate = if secs > 0.0 { (count - 1.0).max(0.0) / secs } else { 0.0 };
            sum += rate;
            min = min.min(rate);
        }
        samples.sort_unstable();
        let p50 = samples.get(samples.len() / 2).copied().unwrap_or(0);
        if bad > 0 {
            println!("stream,{},{},{},0,0,0,nan,error: {} messages lost or corrupt", o.mech(), o.nrecv, size, bad);
        } else {
            println!("stream,{},{},{},{:.1},{:.1},0,{},ok", o.mech(), o.nrecv, size, sum / o.nrecv as f64, min, p50);
        }
    }
    if o.nrecv == 1 {
        let ping = node
            .service_builder(&svc_name(&o.tag, "ping"))
            .publish_subscribe::<[u8]>()
            .max_subscribers(1)
            .history_size(0)
            .subscriber_max_buffer_size(4)
            .enable_safe_overflow(false)
            .create()?;
        let publ = ping
            .publisher_builder()
            .initial_max_slice_len(64)
            .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
            .create()?;
        let notify = notifier(&node, o, "ping")?;
        while ping.dynamic_config().number_of_subscribers() < 1 {
            std::thread::sleep(Duration::from_micros(200));
        }
        let pong = loop {
            if let Ok(s) = node.service_builder(&svc_name(&o.tag, "pong")).publish_subscribe::<[u8]>().open() {
                break s;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let sub = pong.subscriber_builder().create()?;
        let wake = listener(&node, o, "pong")?;
        let mut line = String::new();
        readers[0].read_line(&mut line)?;
        let mut lat: Vec<u64> = Vec::new();
        let start = Instant::now();
        let mut bad = 0u64;
        let mut seq = 0u64;
        loop {
            let t = Instant::now();
            let mut m = publ.loan_slice_uninit(64)?;
            let bytes = unsafe { &mut *(m.payload_mut() as *mut [std::mem::MaybeUninit<u8>] as *mut [u8]) };
            msg_write(bytes, seq, o.full);
            unsafe { m.assume_init() }.send()?;
            notify.sent()?;
            let s = receive_one(&sub, &wake)?;
            if !msg_check(s.payload(), seq, o.full) {
                bad += 1;
            }
            drop(s);
            let d = t.elapsed().as_nanos() as u64 / 2;
            if seq >= 200 {
                lat.push(d);
            }
            seq += 1;
            if start.elapsed().as_secs_f64() >= o.seconds || lat.len() >= 1 << 20 {
                break;
            }
        }
        let stop = publ.loan_slice_uninit(0)?;
        unsafe { stop.assume_init() }.send()?;
        notify.sent()?;
        lat.sort_unstable();
        let n = lat.len();
        if bad > 0 || n == 0 {
            println!("pingpong,{},64,0,0,0,0,0,0,error: {} replies corrupt", o.mech(), bad);
        } else {
            let q = |f: f64| lat[((f * (n - 1) as f64) + 0.5) as usize];
            let mean = lat.iter().sum::<u64>() as f64 / n as f64;
            println!("pingpong,{},64,{},{},{},{},{:.1},{},ok", o.mech(), q(0.5), q(0.99), q(0.999), lat[n - 1], mean, n);
        }
    }
    for mut k in kids {
        k.wait()?;
    }
    Ok(())
}

fn main() {
    set_log_level(LogLevel::Error);
    let o = parse();
    let r = if o.role_sub { subscriber_main(&o) } else { publisher_main(&o) };
    if let Err(e) = r {
        eprintln!("iceoryx2 benchmark: {}", e);
        std::process::exit(1);
    }
}
