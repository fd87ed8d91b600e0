//! Which redb tree (redb table) holds each logical table, on the embedded
//! store.
//!
//! Most logical tables share one tree ([`PHYSICAL`]): a commit then
//! touches few trees, which cuts the writer's page work. A few tables get a
//! tree of their own ([`OWN_TREES`]): those that grow with every payment
//! and whose keys arrive in ascending order across all of kobo (UUIDv7
//! ids, time-ordered codes, sequences, times). redb fills the rightmost
//! leaf of a tree to the brim and starts a new one when a key greater than
//! every key arrives, but splits any other full leaf in the middle; inside
//! the shared tree such a table is never rightmost, so every leaf it left
//! behind stayed half empty (docs/performance.md, "the store file's
//! bytes"). In a tree of its own each of its leaves is left full. The
//! payment intent list and status indexes ascend within each merchant's
//! range: in their own trees the newest merchant's leaves are left full
//! (in a store of one merchant, all of them), the others' as before.
//!
//! Keys are the same physical keys in every tree (table id byte first),
//! so a key's table, and so its tree, is known from the key alone (backups
//! and restores carry physical keys). A store written before a table had
//! its own tree holds that table's rows in the shared tree: the first open
//! moves them, in the same write transaction that creates the trees
//! ([`open_all`]), so a crash leaves either every row moved or none.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use redb::{
    Database, ReadOnlyTable, ReadTransaction, ReadableTable, TableDefinition, WriteTransaction,
};

use crate::key_index::{self, KeyIndex, KeysRead, KeysWrite, Published};
use crate::prefix_end;
use crate::tables::{Def, Table, WriteTable, PHYSICAL};

/// The tables with a tree of their own, named like the table.
pub const OWN_TREES: [Table; 7] = [
    Table::PaymentIntents,
    Table::PaymentIntentIndex,
    Table::PaymentIntentStatusIndex,
    Table::CheckoutLinks,
    Table::ChargeAttempts,
    Table::Events,
    Table::IdempotencyExpiry,
];

/// `table`'s place in [`OWN_TREES`], if it has a tree of its own.
fn own(table: Table) -> Option<usize> {
    OWN_TREES.iter().position(|t| *t == table)
}

/// The table whose id is a physical key's first byte.
fn table_of_key(key: &[u8]) -> Option<Table> {
    let id = *key.first()?;
    Table::ALL.get(usize::from(id).checked_sub(1)?).copied()
}

fn definition(table: Table) -> Def {
    TableDefinition::new(table.name())
}

type ReadTable = ReadOnlyTable<&'static [u8], &'static [u8]>;

/// Creates every tree, and moves the rows of a table given its own tree
/// since the store was written out of the shared one (see the module
/// comment); the caller commits.
pub(crate) fn open_all(txn: &WriteTransaction) -> Result<(), redb::Error> {
    let mut shared = txn.open_table(PHYSICAL)?;
    for table in OWN_TREES {
        let mut tree = txn.open_table(definition(table))?;
        let lower = table.physical(&[]);
        let upper = prefix_end(&lower);
        for row in shared.extract_from_if(lower.as_slice()..upper.as_slice(), |_, _| true)? {
            let (k, v) = row?;
            tree.insert(k.value(), v.value())?;
        }
    }
    Ok(())
}

/// A held-back write: a put (`Some` value) or a delete (`None`).
type HeldWrite<'b> = (Table, &'b [u8], Option<&'b [u8]>);

/// The trees of one write transaction, each opened on first use.
///
/// Puts and deletes into the tables with a tree of their own are held
/// back and applied in key order at [`WriteTrees::finish`]: the batches of
/// one commit were built concurrently, so their ids arrive a little out of
/// order, and redb keeps a leaf full only for a key greater than every
/// key in its tree. Preconditions see the held-back writes
/// ([`WriteTrees::contains`]), and the writes to one key keep their order,
/// so the commit's effect is the same as applying each in turn.
pub(crate) struct WriteTrees<'txn, 'b> {
    txn: &'txn WriteTransaction,
    shared: WriteTable<'txn>,
    own: [Option<WriteTable<'txn>>; OWN_TREES.len()],
    /// Held-back writes, in arrival order.
    held: Vec<HeldWrite<'b>>,
    /// Whether each held-back key is present after its last write.
    present: HashMap<&'b [u8], bool>,
    /// The log-structured idempotency key index ([`key_index`]).
    keys: KeysWrite<'txn>,
}

impl<'txn, 'b> WriteTrees<'txn, 'b> {
    pub(crate) fn new(
        txn: &'txn WriteTransaction,
        keys: Arc<KeyIndex>,
    ) -> Result<Self, redb::TableError> {
        Ok(WriteTrees {
            txn,
            shared: txn.open_table(PHYSICAL)?,
            own: Default::default(),
            held: Vec::new(),
            present: HashMap::new(),
            keys: KeysWrite::new(keys),
        })
    }

    /// Makes room for `writes` held-back writes, so that a group's
    /// writes do not grow (and rehash) the held-back set a step at a time.
    pub(crate) fn reserve(&mut self, writes: usize) {
        self.held.reserve(writes);
        self.present.reserve(writes);
    }

    /// Builds this transaction's slice of the idempotency key index's run
    /// under way ([`KeysWrite::step`]), and returns its effect on the
    /// index, settled once it has committed ([`Published::done`]). Call
    /// after [`WriteTrees::finish`], before committing.
    pub(crate) fn published(&mut self) -> Result<Published, String> {
        self.keys.step(self.txn)?;
        Ok(self.keys.commit())
    }

    /// The tree holding `table`, with every held-back write applied.
    pub(crate) fn of(&mut self, table: Table) -> Result<&mut WriteTable<'txn>, String> {
        if table == key_index::TABLE {
            return Err(format!(
                "{} is log-structured: only puts, deletes and presence checks reach it",
                table.name()
            ));
        }
        if own(table).is_some() {
            self.finish()?;
        }
        self.tree(table).map_err(|e| e.to_string())
    }

    fn tree(&mut self, table: Table) -> Result<&mut WriteTable<'txn>, redb::TableError> {
        let Some(i) = own(table) else {
            return Ok(&mut self.shared);
        };
        if self.own[i].is_none() {
            self.own[i] = Some(self.txn.open_table(definition(table))?);
        }
        Ok(self.own[i].as_mut().expect("opened above"))
    }

    /// Writes the physical row `key`, `value` into its tree (the shared
    /// one for a key of no known table); for restores, which hold nothing
    /// back.
    pub(crate) fn restore_row(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let tree = match table_of_key(key) {
            Some(key_index::TABLE) => return self.keys.write(self.txn, key, Some(value)),
            Some(table) => self.of(table)?,
            None => &mut self.shared,
        };
        tree.insert(key, value).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Whether the physical key `key` of `table` is present, held-back
    /// writes included.
    pub(crate) fn contains(&mut self, table: Table, key: &[u8]) -> Result<bool, String> {
        if let Some(present) = self.present.get(key) {
            return Ok(*present);
        }
        if table == key_index::TABLE {
            return Ok(self.keys.get(self.txn, key)?.is_some());
        }
        let tree = self.tree(table).map_err(|e| e.to_string())?;
        Ok(tree.get(key).map_err(|e| e.to_string())?.is_some())
    }

    pub(crate) fn put(
        &mut self,
        table: Table,
        key: &'b [u8],
        value: &'b [u8],
    ) -> Result<(), String> {
        if table == key_index::TABLE {
            return self.keys.write(self.txn, key, Some(value));
        }
        if own(table).is_some() {
            self.held.push((table, key, Some(value)));
            self.present.insert(key, true);
            return Ok(());
        }
        let tree = self.tree(table).map_err(|e| e.to_string())?;
        tree.insert(key, value).map_err(|e| e.to_string())?;
        Ok(())
    }

    pub(crate) fn delete(&mut self, table: Table, key: &'b [u8]) -> Result<(), String> {
        if table == key_index::TABLE {
            return self.keys.write(self.txn, key, None);
        }
        if own(table).is_some() {
            self.held.push((table, key, None));
            self.present.insert(key, false);
            return Ok(());
        }
        let tree = self.tree(table).map_err(|e| e.to_string())?;
        tree.remove(key).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Applies the held-back writes in key order (stable: the writes to
    /// one key in arrival order). Call before committing.
    pub(crate) fn finish(&mut self) -> Result<(), String> {
        let mut held = std::mem::take(&mut self.held);
        self.present.clear();
        held.sort_by(|a, b| a.1.cmp(b.1));
        for (table, key, value) in held.drain(..) {
            let tree = self.tree(table).map_err(|e| e.to_string())?;
            match value {
                Some(v) => drop(tree.insert(key, v).map_err(|e| e.to_string())?),
                None => drop(tree.remove(key).map_err(|e| e.to_string())?),
            }
        }
        self.held = held;
        Ok(())
    }
}

/// The newest read snapshot, shared by every reader that begins before the
/// next commit: beginning a redb read transaction, opening its trees and
/// taking the key index's view cost more than most reads themselves
/// (docs/performance.md, "one read snapshot per commit"). A snapshot is
/// tagged with [`KeyIndex::commits`] as loaded *before* it began, so it
/// holds at least that many commits; a reader whose own load of the count
/// matches reuses it, and so still sees every commit acknowledged before
/// its call (each raises the count before its acknowledgement). The first
/// reader after a commit begins the next one.
#[derive(Default)]
pub(crate) struct LatestSnapshot {
    latest: Mutex<Option<(u64, Arc<ReadTrees>)>>,
}

impl LatestSnapshot {
    /// A snapshot that sees every commit finished before this call.
    pub(crate) fn read(
        &self,
        db: &Database,
        keys: &KeyIndex,
    ) -> Result<Arc<ReadTrees>, redb::Error> {
        let commits = keys.commits();
        if let Some((seen, trees)) = &*self.latest.lock().expect("latest snapshot") {
            if *seen == commits {
                return Ok(trees.clone());
            }
        }
        let trees = Arc::new(ReadTrees::begin(db, keys)?);
        let replaced = {
            let mut latest = self.latest.lock().expect("latest snapshot");
            let newer = latest.as_ref().is_none_or(|(seen, _)| *seen < commits);
            if newer {
                latest.replace((commits, trees.clone()))
            } else {
                None
            }
        };
        // The one it replaced ends outside the lock, if this held it last.
        drop(replaced);
        Ok(trees)
    }

    /// Lets the shared snapshot go (after a commit, which ends its use for
    /// new readers): until the next read begins one, no idle snapshot keeps
    /// redb from reusing the pages later commits free, or a closing store
    /// open.
    pub(crate) fn release(&self) {
        self.release_if(|_| true);
    }

    /// [`LatestSnapshot::release`] for the writer, after its commit, once
    /// `commits` (the count now) has passed the snapshot by two: no reader
    /// came between the last two commits, so none may come for a while.
    /// Under load a reader begins a fresh one after every commit, and the
    /// writer leaves it (ending it after every commit on the writer thread
    /// cost ~1% of flows, docs/performance.md).
    pub(crate) fn release_unread(&self, commits: u64) {
        self.release_if(|seen| seen + 1 < commits);
    }

    /// Takes the snapshot when `stale(its tag)`, and ends it outside the
    /// lock.
    fn release_if(&self, stale: impl FnOnce(u64) -> bool) {
        let mut latest = self.latest.lock().expect("latest snapshot");
        let released = match latest.as_ref() {
            Some((seen, _)) if stale(*seen) => latest.take(),
            _ => None,
        };
        drop(latest);
        drop(released);
    }
}

/// The trees of one read snapshot, each opened on first use.
pub(crate) struct ReadTrees {
    /// This snapshot's number: no other snapshot of any store in this
    /// process has it ([`crate::ReadTxn::snapshot_serial`]).
    pub(crate) serial: u64,
    txn: ReadTransaction,
    shared: ReadTable,
    own: [OnceLock<ReadTable>; OWN_TREES.len()],
    keys: KeysRead,
}

impl ReadTrees {
    /// A snapshot of `db`, with the idempotency key index of the same
    /// moment.
    pub(crate) fn begin(db: &Database, keys: &KeyIndex) -> Result<Self, redb::Error> {
        /// The next snapshot's serial, across every store of the process.
        static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);
        let (txn, keys) = keys.begin_read(db)?;
        Ok(ReadTrees {
            serial: NEXT_SERIAL.fetch_add(1, Ordering::Relaxed),
            shared: txn.open_table(PHYSICAL)?,
            txn,
            own: Default::default(),
            keys,
        })
    }

    /// The tree holding `table` (none for the log-structured
    /// idempotency key index: [`ReadTrees::get`], [`ReadTrees::visit`]).
    pub(crate) fn of(&self, table: Table) -> Result<&ReadTable, redb::TableError> {
        if table == key_index::TABLE {
            return Err(redb::TableError::TableDoesNotExist(table.name().into()));
        }
        let Some(i) = own(table) else {
            return Ok(&self.shared);
        };
        if let Some(t) = self.own[i].get() {
            return Ok(t);
        }
        let opened = self.txn.open_table(definition(table))?;
        Ok(self.own[i].get_or_init(|| opened))
    }

    /// The value of the physical key `key` of `table`.
    pub(crate) fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, redb::Error> {
        if table == key_index::TABLE {
            return self.keys.get(&self.txn, key);
        }
        Ok(self.of(table)?.get(key)?.map(|v| v.value().to_vec()))
    }

    /// Visits the rows of `table` with physical keys in `lower..upper`,
    /// ascending (descending when `rev`); the visitor returns `false` to
    /// stop.
    pub(crate) fn visit<E: From<redb::Error>>(
        &self,
        table: Table,
        lower: &[u8],
        upper: &[u8],
        rev: bool,
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<bool, E>,
    ) -> Result<(), E> {
        if table == key_index::TABLE {
            return self.keys.visit(&self.txn, lower, upper, rev, visit);
        }
        let range = self
            .of(table)
            .map_err(redb::Error::from)?
            .range::<&[u8]>(lower..upper)
            .map_err(redb::Error::from)?;
        let mut step = |item: Result<_, redb::StorageError>| -> Result<bool, E> {
            let (k, v): (redb::AccessGuard<&[u8]>, redb::AccessGuard<&[u8]>) =
                item.map_err(redb::Error::from)?;
            visit(k.value(), v.value())
        };
        if rev {
            for item in range.rev() {
                if !step(item)? {
                    break;
                }
            }
        } else {
            for item in range {
                if !step(item)? {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Visits every row of every table in the order of the physical keys
    /// (a backup lists its keys in order), whichever tree holds it.
    pub(crate) fn visit_all<E: From<redb::Error>>(
        &self,
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut apart: Vec<Table> = OWN_TREES.to_vec();
        apart.push(key_index::TABLE);
        apart.sort_by_key(|t| t.id());
        // `Meta` lives in the shared tree: visiting it reads that tree.
        let shared = Table::Meta;
        let mut lower = Vec::new();
        let mut each = |k: &[u8], v: &[u8]| visit(k, v).map(|()| true);
        for table in apart {
            let prefix = table.physical(&[]);
            let end = prefix_end(&prefix);
            self.visit(shared, &lower, &prefix, false, &mut each)?;
            self.visit(table, &prefix, &end, false, &mut each)?;
            lower = end;
        }
        for item in self
            .shared
            .range::<&[u8]>(lower.as_slice()..)
            .map_err(redb::Error::from)?
        {
            let (k, v) = item.map_err(redb::Error::from)?;
            each(k.value(), v.value())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Store, STORE_FILE};
    use redb::{Database, ReadableDatabase};

    fn rows_in(db: &Database, def: Def) -> Vec<(Vec<u8>, Vec<u8>)> {
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(def).unwrap();
        t.iter()
            .unwrap()
            .map(|r| {
                let (k, v) = r.unwrap();
                (k.value().to_vec(), v.value().to_vec())
            })
            .collect()
    }

    /// Rows of tables with and without a tree of their own, each valued
    /// with its key.
    const OLD_ROWS: [(Table, &[u8]); 5] = [
        (Table::Meta, b"m"),
        (Table::PaymentIntents, b"pi-1"),
        (Table::PaymentIntents, b"pi-2"),
        (Table::Idempotency, b"k"),
        (Table::IdempotencyExpiry, b"x"),
    ];

    #[test]
    fn a_store_written_before_a_table_had_its_own_tree_has_its_rows_moved_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STORE_FILE);
        {
            // Every row in the shared tree, as an older kobo wrote them.
            let db = Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut t = txn.open_table(PHYSICAL).unwrap();
                for (table, key) in OLD_ROWS {
                    t.insert(table.physical(key).as_slice(), key).unwrap();
                }
            }
            txn.commit().unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        let read = store.read().unwrap();
        for (table, key) in OLD_ROWS {
            assert_eq!(read.get(table, key).unwrap().as_deref(), Some(key));
        }
        drop(read);
        let db = store.redb().unwrap();
        let shared: Vec<u8> = rows_in(db, PHYSICAL).iter().map(|(k, _)| k[0]).collect();
        assert_eq!(shared, vec![Table::Meta.id(), Table::Idempotency.id()]);
        let intents = rows_in(db, definition(Table::PaymentIntents));
        assert_eq!(intents.len(), 2);
        assert_eq!(rows_in(db, definition(Table::IdempotencyExpiry)).len(), 1);
    }

    #[test]
    fn held_back_writes_are_seen_by_preconditions_keep_their_order_per_key_and_land_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (db, keys) = store.redb_with_keys().unwrap();
        let key = |k: &[u8]| Table::Events.physical(k);
        let (c, a, b, gone) = (key(b"c"), key(b"a"), key(b"b"), key(b"gone"));
        let txn = db.begin_write().unwrap();
        {
            let mut trees = WriteTrees::new(&txn, keys.clone()).unwrap();
            trees.put(Table::Events, &c, b"1").unwrap();
            trees.put(Table::Events, &a, b"1").unwrap();
            assert!(trees.contains(Table::Events, &a).unwrap());
            assert!(!trees.contains(Table::Events, &b).unwrap());
            trees.put(Table::Events, &gone, b"1").unwrap();
            trees.delete(Table::Events, &gone).unwrap();
            assert!(!trees.contains(Table::Events, &gone).unwrap());
            trees.put(Table::Events, &b, b"1").unwrap();
            trees.put(Table::Events, &b, b"2").unwrap();
            // Nothing reached the tree yet.
            let tree = trees.tree(Table::Events).unwrap();
            assert!(tree.get(a.as_slice()).unwrap().is_none());
            trees.finish().unwrap();
        }
        txn.commit().unwrap();
        assert_eq!(
            rows_in(db, definition(Table::Events)),
            vec![(a, b"1".to_vec()), (b, b"2".to_vec()), (c, b"1".to_vec())]
        );
    }

    #[test]
    fn a_counter_added_in_a_tree_of_its_own_sees_the_writes_held_back_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut batch = crate::Batch::new();
        batch
            .put_raw(
                Table::EventOutbox,
                b"n".to_vec(),
                5i64.to_be_bytes().to_vec(),
            )
            .add(Table::EventOutbox, b"n".to_vec(), &[2]);
        store.apply(&batch).unwrap();
        let read = store.read().unwrap();
        let v = read.get(Table::EventOutbox, b"n").unwrap().unwrap();
        assert_eq!(crate::writer::counters(&v), vec![7]);
    }

    #[test]
    fn a_physical_keys_first_byte_names_its_table() {
        for table in Table::ALL {
            assert_eq!(table_of_key(&table.physical(b"k")), Some(*table));
        }
        assert_eq!(table_of_key(&[]), None);
        assert_eq!(table_of_key(&[0]), None);
        assert_eq!(table_of_key(&[0xfe]), None);
    }

    #[test]
    fn a_table_with_its_own_tree_is_routed_to_it_and_the_rest_share_one() {
        assert_eq!(own(Table::PaymentIntents), Some(0));
        assert_eq!(own(Table::PaymentIntentStatusIndex), Some(2));
        assert_eq!(own(Table::IdempotencyExpiry), Some(6));
        assert_eq!(own(Table::EventOutbox), None);
        assert_eq!(own(Table::Idempotency), None);
        assert_eq!(own(Table::Meta), None);
    }

    /// The snapshot behind a read (redb's).
    fn snapshot(read: &crate::ReadTxn) -> &Arc<ReadTrees> {
        match &read.read {
            crate::Read::Redb(trees) => trees,
            crate::Read::Postgres(_) => unreachable!("a redb store"),
        }
    }

    #[tokio::test]
    async fn readers_between_commits_share_one_snapshot_and_every_commit_ends_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let row = |n: u8| (vec![n], vec![n; 3]);
        let has = |read: &crate::ReadTxn, table, n: u8| read.get(table, &[n]).unwrap().is_some();
        let first = store.read().unwrap();
        let again = store.read().unwrap();
        assert!(Arc::ptr_eq(snapshot(&first), snapshot(&again)));
        assert_eq!(first.snapshot_serial(), again.snapshot_serial());
        assert!(first.snapshot_serial().is_some());

        // A commit through the writer (of an ordinary table and of the
        // idempotency key index) ends the shared snapshot.
        let writer = store.start_writer(crate::WriterMetrics::new());
        let mut batch = crate::Batch::new();
        let (k, v) = row(1);
        batch.put_raw(Table::Events, k.clone(), v.clone());
        batch.put_raw(Table::Idempotency, k, v);
        writer.commit(batch).await.unwrap();
        let crate::Engine::Redb {
            snapshot: shared, ..
        } = &store.engine
        else {
            unreachable!("a redb store")
        };
        assert!(
            shared.latest.lock().unwrap().is_some(),
            "one commit after it"
        );
        writer.commit(crate::Batch::new()).await.unwrap();
        assert!(
            shared.latest.lock().unwrap().is_none(),
            "two commits without a read: the writer let the snapshot go"
        );
        let after_writer = store.read().unwrap();
        assert!(!Arc::ptr_eq(snapshot(&first), snapshot(&after_writer)));
        assert_ne!(first.snapshot_serial(), after_writer.snapshot_serial());
        assert!(has(&after_writer, Table::Events, 1) && has(&after_writer, Table::Idempotency, 1));
        assert!(!has(&first, Table::Events, 1) && !has(&first, Table::Idempotency, 1));
        assert!(Arc::ptr_eq(
            snapshot(&after_writer),
            snapshot(&store.read().unwrap())
        ));

        // So does a batch applied without the writer (the offline tools).
        let mut batch = crate::Batch::new();
        let (k, v) = row(2);
        batch.put_raw(Table::Events, k, v);
        store.apply(&batch).unwrap();
        assert!(shared.latest.lock().unwrap().is_none(), "so did the apply");
        let after_apply = store.read().unwrap();
        assert_ne!(
            after_apply.snapshot_serial(),
            after_writer.snapshot_serial()
        );
        assert!(has(&after_apply, Table::Events, 2));
        assert!(!has(&after_writer, Table::Events, 2));

        // A refused batch leaves nothing to see.
        let mut refused = crate::Batch::new();
        refused
            .require_absent(Table::Events, vec![2])
            .put_raw(Table::Events, vec![3], vec![3]);
        assert!(writer.commit(refused).await.is_err());
        let after_refusal = store.read().unwrap();
        assert!(!has(&after_refusal, Table::Events, 3));
    }
}
