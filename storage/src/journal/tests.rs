use redb::StorageBackend;

use super::*;

/// A small deterministic generator (xorshift64*), so a failing seed
/// repeats.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn contents(backend: &Journaled) -> Vec<u8> {
    let len = backend.len().unwrap() as usize;
    let mut out = vec![0u8; len];
    backend.read(0, &mut out).unwrap();
    out
}

/// The store file and its journals copied as they are now: what a
/// process killed at this moment leaves on disk.
fn crash_copy(path: &Path, into: &Path) -> PathBuf {
    std::fs::create_dir_all(into).unwrap();
    let copy = into.join("kobo.redb");
    std::fs::copy(path, &copy).unwrap();
    for (from, to) in journal_paths(path).iter().zip(journal_paths(&copy)) {
        std::fs::copy(from, to).unwrap();
    }
    copy
}

/// Random writes (whole and partial blocks), cuts, growths and syncs
/// against a plain byte vector, through several rotations: every read
/// matches the model, and a copy taken after any sync opens as exactly
/// the model at that sync (what was written after it and not synced is
/// gone, what was synced is there).
#[test]
fn the_journaled_file_reads_as_written_and_a_crash_keeps_the_last_sync() {
    for seed in [1u64, 7, 42, 2026] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kobo.redb");
        let backend = Journaled::open_rotating_at(&path, 64 << 10, true).unwrap();
        let mut rng = Rng(seed);
        let mut model: Vec<u8> = Vec::new();
        let mut crashes = 0;
        for step in 0..600 {
            match rng.below(10) {
                0..=4 => {
                    let offset = rng.below(model.len() as u64 + 2 * BLOCK as u64);
                    let len = 1 + rng.below(3 * BLOCK as u64) as usize;
                    let byte = (rng.next() & 0xff) as u8;
                    let data: Vec<u8> = (0..len).map(|i| byte.wrapping_add(i as u8)).collect();
                    backend.write(offset, &data).unwrap();
                    let end = offset as usize + len;
                    if model.len() < end {
                        model.resize(end, 0);
                    }
                    model[offset as usize..end].copy_from_slice(&data);
                }
                5 => {
                    let len = if rng.below(2) == 0 {
                        rng.below(model.len() as u64 + 1)
                    } else {
                        model.len() as u64 + rng.below(3 * BLOCK as u64)
                    };
                    backend.set_len(len).unwrap();
                    model.resize(len as usize, 0);
                }
                6 => {
                    if !model.is_empty() {
                        let offset = rng.below(model.len() as u64);
                        let len = 1 + rng.below(model.len() as u64 - offset) as usize;
                        let mut out = vec![0u8; len];
                        backend.read(offset, &mut out).unwrap();
                        assert_eq!(
                            out,
                            model[offset as usize..offset as usize + len],
                            "seed {seed} step {step}"
                        );
                    }
                }
                _ => {
                    backend.sync_data().unwrap();
                    if rng.below(8) == 0 {
                        crashes += 1;
                        let copy = crash_copy(&path, &dir.path().join(format!("crash-{step}")));
                        let reopened = Journaled::open(&copy).unwrap();
                        assert_eq!(
                            contents(&reopened),
                            model,
                            "seed {seed} crash at step {step}"
                        );
                        reopened.close().unwrap();
                    }
                }
            }
        }
        assert!(crashes > 3, "seed {seed}: {crashes} crashes");
        let generations = backend.journals.lock().unwrap().generation;
        assert!(
            generations > 4,
            "seed {seed}: only {generations} generations"
        );
        assert_eq!(contents(&backend), model);
        backend.close().unwrap();
        drop(backend);
        let reopened = Journaled::open(&path).unwrap();
        assert_eq!(contents(&reopened), model, "seed {seed} after a close");
        // Closed, the store file alone is the store.
        assert_eq!(std::fs::read(&path).unwrap(), model);
    }
}

/// A write that was not synced is not in the journal: a copy taken
/// before the sync opens without it, one taken after with it.
#[test]
fn only_synced_writes_survive_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kobo.redb");
    let backend = Journaled::open(&path).unwrap();
    backend.write(0, &[1u8; 3 * BLOCK]).unwrap();
    backend.sync_data().unwrap();
    backend.write(BLOCK as u64, &[2u8; 10]).unwrap();
    let before = Journaled::open(&crash_copy(&path, &dir.path().join("before"))).unwrap();
    assert_eq!(contents(&before), vec![1u8; 3 * BLOCK]);
    backend.sync_data().unwrap();
    let after = Journaled::open(&crash_copy(&path, &dir.path().join("after"))).unwrap();
    let mut expected = vec![1u8; 3 * BLOCK];
    expected[BLOCK..BLOCK + 10].fill(2);
    assert_eq!(contents(&after), expected);
    // Nothing reached the store file itself: the journal holds it all.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
}

/// A crash while the journals are replayed (before they are marked
/// applied) replays them again at the next open: the same store.
#[test]
fn replaying_twice_gives_the_same_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kobo.redb");
    let backend = Journaled::open_rotating_at(&path, 16 * BLOCK as u64, true).unwrap();
    let mut rng = Rng(3);
    for round in 0..60u64 {
        let offset = rng.below(40) * BLOCK as u64;
        backend.write(offset, &[round as u8 + 1; BLOCK]).unwrap();
        if round % 7 == 3 {
            backend.set_len(rng.below(30) * BLOCK as u64 + 100).unwrap();
        }
        backend.sync_data().unwrap();
    }
    let expected = contents(&backend);
    let copy = crash_copy(&path, &dir.path().join("crash"));
    let files = journal_paths(&copy).map(|p| open_rw(&p).unwrap());
    let store = open_rw(&copy).unwrap();
    replay(&store, &files).unwrap();
    replay(&store, &files).unwrap();
    drop((store, files));
    assert_eq!(std::fs::read(&copy).unwrap(), expected);
    let reopened = Journaled::open(&copy).unwrap();
    assert_eq!(contents(&reopened), expected);
}

/// A crash while a frozen layer is not yet in the store file: its
/// journal and the active one are both replayed, older first.
#[test]
fn a_crash_before_the_checkpoint_replays_both_journals_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kobo.redb");
    let backend = Journaled::open_rotating_at(&path, 8 * BLOCK as u64, false).unwrap();
    // Blocks 0-3 written in the frozen generation, block 0 again in the
    // active one, block 1 partly (the active layer then holds its whole
    // image), the store cut inside block 3 and grown: block 2 is only in
    // the frozen journal.
    for round in 1..=2u8 {
        backend.write(0, &[round; 4 * BLOCK]).unwrap();
        backend.sync_data().unwrap();
    }
    assert!(
        backend.state().frozen.is_some(),
        "the first layer is frozen"
    );
    for round in 3..=4u8 {
        backend.write(0, &[round; BLOCK]).unwrap();
        backend.sync_data().unwrap();
    }
    backend.write(BLOCK as u64, &[9; 100]).unwrap();
    backend.set_len(3 * BLOCK as u64 + 10).unwrap();
    backend.set_len(5 * BLOCK as u64).unwrap();
    backend.sync_data().unwrap();
    let expected = contents(&backend);
    assert_eq!(expected[0], 4);
    assert_eq!(
        &expected[BLOCK..BLOCK + 101],
        &[[9; 100].as_slice(), &[2]].concat()[..]
    );
    assert_eq!(expected[2 * BLOCK], 2);
    assert_eq!(expected[3 * BLOCK + 9], 2);
    assert_eq!(expected[3 * BLOCK + 10], 0);
    assert_eq!(expected.len(), 5 * BLOCK);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        0,
        "nothing checkpointed"
    );
    let copy = crash_copy(&path, &dir.path().join("crash"));
    assert_eq!(contents(&Journaled::open(&copy).unwrap()), expected);
}

#[test]
fn a_second_open_of_the_same_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kobo.redb");
    let first = Journaled::open(&path).unwrap();
    assert!(matches!(Journaled::open(&path), Err(OpenError::Locked)));
    first.close().unwrap();
    drop(first);
    Journaled::open(&path).unwrap();
}
