//! A thread attached to a model of the default machine that times a workload on request: the
//! harness the benches share for what runs under the emulator.

use std::sync::mpsc;
use std::time::Duration;

use kfd_emu::model::{Model, ModelConfig};

/// The attached thread; it ends when this is dropped.
pub struct Attached {
    requests: mpsc::Sender<u64>,
    results: mpsc::Receiver<Duration>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Attached {
    /// Starts the thread: `setup` runs attached and returns what times `n` iterations.
    pub fn start<S, R>(setup: S) -> Attached
    where
        S: FnOnce() -> R + Send + 'static,
        R: FnMut(u64) -> Duration,
    {
        let (requests, rx) = mpsc::channel::<u64>();
        let (tx, results) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let model = Model::new(ModelConfig::default()).expect("model");
            kfd_emu::supervisor::run_attached(model, move || {
                let mut run = setup();
                for n in rx {
                    if tx.send(run(n)).is_err() {
                        break;
                    }
                }
            })
            .expect("attach");
        });
        Attached {
            requests,
            results,
            thread: Some(thread),
        }
    }

    /// The time the attached thread took for `n` iterations.
    pub fn time(&self, n: u64) -> Duration {
        self.requests.send(n).expect("attached thread alive");
        self.results.recv().expect("attached thread answers")
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        let (closed, _) = mpsc::channel();
        self.requests = closed;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
