//! kfdtool's own tables in a rocpd database: what an exact replay needs and rocprofv3 has no
//! place for. rocpd reads only `rocpd_*` tables (its `importer.py` lists `sqlite_master`
//! tables `LIKE 'rocpd_%'`; the views select from the `rocpd_*` views by name), so
//! `kfdtool_*` tables are ignored by it and by every view.
//!
//! * `kfdtool_svm_range`: the SVM ranges of the traced process as registered (SET_ATTR on new
//!   memory) and each later attribute change, in time order: `pid`, `time` (ns, the records'
//!   clock), `start`, `end` (bytes), `event` (`REGISTER` or `SET_ATTR`) and `attrs`, the
//!   attributes that call set, as JSON: `granularity` (log2 pages), `preferred_loc` and
//!   `prefetch_loc` (`"system"`, `"undefined"` or a node id), `access` (`{node: "access" | "in_place" |
//!   "none"}`), `set_flags` and `clr_flags` (`KFD_IOCTL_SVM_FLAG_*`).
//! * `kfdtool_metadata`: `tag`/`value` pairs; `xnack` is `on` or `off`, the process's XNACK
//!   mode while recording.
//!
//! Neither the kernel's SMI events nor rocprofv3 carry these, so `kfdtool trace` on hardware
//! has nothing to put here (its replay says what it assumed). On the embedded emulator the
//! model sees every call: `kfdtool trace` installs an [`SvmRecorder`] as the model's SVM
//! observer ([`kfd_emu::model::SvmObserver`]) and, once the program ended, adds what it
//! heard to the database ([`SvmRecorder::append_to`]); a program that knows its own calls can
//! write them with [`write()`]. A trace that has them replays exactly ([`crate::replay`]).

use rusqlite::{Connection, params};
use serde_json::{Map, Value, json};

/// A location an SVM attribute names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeLoc {
    /// System memory.
    System,
    /// A GPU agent's node.
    Node(u32),
    /// No location (`KFD_IOCTL_SVM_LOCATION_UNDEFINED`: no preference).
    Undefined,
}

/// A GPU's access to a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeAccess {
    /// ACCESS.
    Access,
    /// ACCESS_IN_PLACE.
    InPlace,
    /// NO_ACCESS.
    None,
}

/// The attributes one SET_ATTR call set (`None`: not set by it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeAttrs {
    /// GRANULARITY, log2 pages.
    pub granularity: Option<u8>,
    /// PREFERRED_LOC.
    pub preferred: Option<RangeLoc>,
    /// PREFETCH_LOC.
    pub prefetch: Option<RangeLoc>,
    /// ACCESS, ACCESS_IN_PLACE or NO_ACCESS per GPU node.
    pub access: Vec<(u32, RangeAccess)>,
    /// SET_FLAGS.
    pub set_flags: u32,
    /// CLR_FLAGS.
    pub clr_flags: u32,
}

/// What a SET_ATTR call was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeEvent {
    /// The range's registration (its first SET_ATTR).
    Register,
    /// A later change of registered memory.
    SetAttr,
}

/// One SET_ATTR call of the traced process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SvmRangeRecord {
    /// The process.
    pub pid: u32,
    /// When (ns, the records' clock).
    pub time_ns: u64,
    /// The first byte.
    pub start: u64,
    /// The end (exclusive).
    pub end: u64,
    /// Registration or change.
    pub event: RangeEvent,
    /// The attributes it set.
    pub attrs: RangeAttrs,
}

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS `kfdtool_svm_range` (\"id\" INTEGER NOT NULL \
     PRIMARY KEY AUTOINCREMENT, \"guid\" TEXT NOT NULL, \"pid\" INTEGER NOT NULL, \"time\" \
     BIGINT NOT NULL, \"start\" BIGINT NOT NULL, \"end\" BIGINT NOT NULL, \"event\" TEXT CHECK \
     (\"event\" IN ('REGISTER', 'SET_ATTR')), \"attrs\" JSONB DEFAULT \"{}\" NOT NULL);\n\
     CREATE TABLE IF NOT EXISTS `kfdtool_metadata` (\"id\" INTEGER NOT NULL PRIMARY KEY \
     AUTOINCREMENT, \"tag\" TEXT NOT NULL, \"value\" TEXT NOT NULL);";

fn loc_json(l: RangeLoc) -> Value {
    match l {
        RangeLoc::System => json!("system"),
        RangeLoc::Undefined => json!("undefined"),
        RangeLoc::Node(n) => json!(n),
    }
}

fn loc_from(v: &Value) -> Option<RangeLoc> {
    match v {
        Value::String(s) if s == "system" => Some(RangeLoc::System),
        Value::String(s) if s == "undefined" => Some(RangeLoc::Undefined),
        v => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(RangeLoc::Node),
    }
}

/// The attributes as the `attrs` column keeps them.
pub fn attrs_json(a: &RangeAttrs) -> Value {
    let mut m = Map::new();
    if let Some(g) = a.granularity {
        m.insert("granularity".into(), g.into());
    }
    if let Some(l) = a.preferred {
        m.insert("preferred_loc".into(), loc_json(l));
    }
    if let Some(l) = a.prefetch {
        m.insert("prefetch_loc".into(), loc_json(l));
    }
    if !a.access.is_empty() {
        let access: Map<String, Value> = a
            .access
            .iter()
            .map(|(node, acc)| {
                let v = match acc {
                    RangeAccess::Access => "access",
                    RangeAccess::InPlace => "in_place",
                    RangeAccess::None => "none",
                };
                (node.to_string(), json!(v))
            })
            .collect();
        m.insert("access".into(), Value::Object(access));
    }
    if a.set_flags != 0 {
        m.insert("set_flags".into(), a.set_flags.into());
    }
    if a.clr_flags != 0 {
        m.insert("clr_flags".into(), a.clr_flags.into());
    }
    Value::Object(m)
}

/// The attributes of an `attrs` column; `None` when a member is malformed.
pub fn attrs_from(v: &Value) -> Option<RangeAttrs> {
    let o = v.as_object()?;
    let mut a = RangeAttrs::default();
    if let Some(g) = o.get("granularity") {
        a.granularity = Some(u8::try_from(g.as_u64()?).ok()?);
    }
    if let Some(l) = o.get("preferred_loc") {
        a.preferred = Some(loc_from(l)?);
    }
    if let Some(l) = o.get("prefetch_loc") {
        a.prefetch = Some(loc_from(l)?);
    }
    if let Some(access) = o.get("access") {
        for (node, acc) in access.as_object()? {
            let acc = match acc.as_str()? {
                "access" => RangeAccess::Access,
                "in_place" => RangeAccess::InPlace,
                "none" => RangeAccess::None,
                _ => return None,
            };
            a.access.push((node.parse().ok()?, acc));
        }
    }
    let flags = |k: &str| {
        o.get(k)
            .map_or(Some(0), |f| u32::try_from(f.as_u64()?).ok())
    };
    a.set_flags = flags("set_flags")?;
    a.clr_flags = flags("clr_flags")?;
    Some(a)
}

/// Records what the emulated driver tells its SVM observer: every SET_ATTR as a
/// [`SvmRangeRecord`] (gpu_ids become node ids) and each process's XNACK mode.
#[derive(Debug)]
pub struct SvmRecorder {
    /// (gpu_id, node id) of each GPU.
    nodes: Vec<(u32, u32)>,
    heard: std::sync::Mutex<Heard>,
}

#[derive(Debug, Default)]
struct Heard {
    ranges: Vec<SvmRangeRecord>,
    xnack: std::collections::BTreeMap<u32, bool>,
}

impl SvmRecorder {
    /// A recorder for a machine whose GPUs are `(gpu_id, node id)`.
    pub fn new(nodes: Vec<(u32, u32)>) -> SvmRecorder {
        SvmRecorder {
            nodes,
            heard: std::sync::Mutex::default(),
        }
    }

    fn heard(&self) -> std::sync::MutexGuard<'_, Heard> {
        self.heard
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The node of `gpu_id` (`None`: not a GPU of the machine).
    fn node(&self, gpu_id: u32) -> Option<u32> {
        self.nodes
            .iter()
            .find(|(g, _)| *g == gpu_id)
            .map(|(_, n)| *n)
    }

    fn loc(&self, value: u32) -> RangeLoc {
        use kfd_ioctl::abi::{KFD_IOCTL_SVM_LOCATION_SYSMEM, KFD_IOCTL_SVM_LOCATION_UNDEFINED};
        match value {
            KFD_IOCTL_SVM_LOCATION_SYSMEM => RangeLoc::System,
            KFD_IOCTL_SVM_LOCATION_UNDEFINED => RangeLoc::Undefined,
            // The model refused a gpu_id it does not know (EINVAL), so this is one of ours.
            g => self.node(g).map_or(RangeLoc::Undefined, RangeLoc::Node),
        }
    }

    /// A SET_ATTR's attributes in the table's terms (the last of a kind wins, as in
    /// `svm_range_apply_attrs`).
    pub fn attrs(&self, attrs: &[kfd_ioctl::abi::kfd_ioctl_svm_attribute]) -> RangeAttrs {
        use kfd_ioctl::abi::{
            KFD_IOCTL_SVM_ATTR_ACCESS, KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE,
            KFD_IOCTL_SVM_ATTR_CLR_FLAGS, KFD_IOCTL_SVM_ATTR_GRANULARITY,
            KFD_IOCTL_SVM_ATTR_NO_ACCESS, KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
            KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, KFD_IOCTL_SVM_ATTR_SET_FLAGS,
        };
        let mut out = RangeAttrs::default();
        for a in attrs {
            let mut access = |kind| {
                if let Some(node) = self.node(a.value) {
                    out.access.retain(|(n, _)| *n != node);
                    out.access.push((node, kind));
                }
            };
            match a.r#type {
                KFD_IOCTL_SVM_ATTR_PREFERRED_LOC => out.preferred = Some(self.loc(a.value)),
                KFD_IOCTL_SVM_ATTR_PREFETCH_LOC => out.prefetch = Some(self.loc(a.value)),
                KFD_IOCTL_SVM_ATTR_ACCESS => access(RangeAccess::Access),
                KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE => access(RangeAccess::InPlace),
                KFD_IOCTL_SVM_ATTR_NO_ACCESS => access(RangeAccess::None),
                KFD_IOCTL_SVM_ATTR_SET_FLAGS => out.set_flags |= a.value,
                KFD_IOCTL_SVM_ATTR_CLR_FLAGS => out.clr_flags |= a.value,
                // The kernel keeps at most 0x3f (`min_t(u32, attrs[i].value, 0x3F)`).
                KFD_IOCTL_SVM_ATTR_GRANULARITY => out.granularity = Some(a.value.min(0x3f) as u8),
                _ => {}
            }
        }
        out
    }

    /// What was heard: the SET_ATTRs in order and the XNACK mode of each pid.
    pub fn heard_so_far(&self) -> (Vec<SvmRangeRecord>, std::collections::BTreeMap<u32, bool>) {
        let h = self.heard();
        (h.ranges.clone(), h.xnack.clone())
    }

    /// Adds what was heard of the processes the rocpd database at `path` profiled (its
    /// `rocpd_info_process` rows) to kfdtool's tables there: their SET_ATTRs and the XNACK
    /// mode of the first of them. Returns how many SET_ATTRs it added and the mode.
    pub fn append_to(&self, path: &std::path::Path) -> rusqlite::Result<(usize, Option<bool>)> {
        let conn = Connection::open(path)?;
        let procs: Vec<(String, i64)> = conn
            .prepare("SELECT guid, pid FROM rocpd_info_process ORDER BY id")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let Some((guid, first)) = procs.first().cloned() else {
            return Ok((0, None));
        };
        let h = self.heard();
        let ranges: Vec<SvmRangeRecord> = h
            .ranges
            .iter()
            .filter(|r| procs.iter().any(|(_, p)| *p == i64::from(r.pid)))
            .cloned()
            .collect();
        let xnack = u32::try_from(first)
            .ok()
            .and_then(|p| h.xnack.get(&p).copied());
        write(&conn, &guid, &ranges, xnack)?;
        Ok((ranges.len(), xnack))
    }
}

impl kfd_emu::model::SvmObserver for SvmRecorder {
    fn set_attr(&self, call: &kfd_emu::model::SvmSetAttr) {
        let Ok(pid) = u32::try_from(call.tgid) else {
            return;
        };
        let record = SvmRangeRecord {
            pid,
            time_ns: call.time_ns,
            start: call.start,
            end: call.start.saturating_add(call.size),
            event: if call.registers {
                RangeEvent::Register
            } else {
                RangeEvent::SetAttr
            },
            attrs: self.attrs(&call.attrs),
        };
        let mut h = self.heard();
        h.ranges.push(record);
        h.xnack.insert(pid, call.xnack);
    }

    fn xnack(&self, tgid: i32, on: bool) {
        if let Ok(pid) = u32::try_from(tgid) {
            self.heard().xnack.insert(pid, on);
        }
    }
}

/// Creates kfdtool's tables on `conn` and writes `ranges` and the XNACK mode into them.
pub fn write(
    conn: &Connection,
    guid: &str,
    ranges: &[SvmRangeRecord],
    xnack: Option<bool>,
) -> rusqlite::Result<()> {
    conn.execute_batch(SCHEMA)?;
    let mut insert = conn.prepare(
        "INSERT INTO `kfdtool_svm_range` (guid, pid, time, start, end, event, attrs) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for r in ranges {
        insert.execute(params![
            guid,
            i64::from(r.pid),
            r.time_ns as i64,
            r.start as i64,
            r.end as i64,
            match r.event {
                RangeEvent::Register => "REGISTER",
                RangeEvent::SetAttr => "SET_ATTR",
            },
            attrs_json(&r.attrs).to_string()
        ])?;
    }
    if let Some(x) = xnack {
        conn.execute(
            "INSERT INTO `kfdtool_metadata` (tag, value) VALUES ('xnack', ?1)",
            [if x { "on" } else { "off" }],
        )?;
    }
    Ok(())
}

/// kfdtool's tables of the database on `conn`: the ranges in time order and the XNACK mode;
/// empty and `None` for a database without them (rocprofv3's). A row that makes no sense is
/// an `Err` naming it.
pub fn read(conn: &Connection) -> Result<(Vec<SvmRangeRecord>, Option<bool>), String> {
    let has = |name: &str| -> Result<bool, String> {
        conn.query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [name],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .map_err(|e| e.to_string())
    };
    let mut ranges = Vec::new();
    if has("kfdtool_svm_range")? {
        let mut stmt = conn
            .prepare(
                "SELECT id, pid, time, start, end, event, attrs FROM kfdtool_svm_range \
                 ORDER BY time, id",
            )
            .map_err(|e| e.to_string())?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, String>(6)?,
                ))
            })
            .map_err(|e| e.to_string())?;
        for row in rows {
            let (id, pid, time, start, end, event, attrs) = row.map_err(|e| e.to_string())?;
            let bad = |what: &str| format!("kfdtool_svm_range row {id}: {what}");
            let (start, end) = (start as u64, end as u64);
            if end <= start {
                return Err(bad("an empty range"));
            }
            let attrs = serde_json::from_str(&attrs)
                .ok()
                .and_then(|v: Value| attrs_from(&v))
                .ok_or_else(|| bad("malformed attrs"))?;
            ranges.push(SvmRangeRecord {
                pid: u32::try_from(pid).map_err(|_| bad("a bad pid"))?,
                time_ns: u64::try_from(time).map_err(|_| bad("a negative time"))?,
                start,
                end,
                event: match event.as_deref() {
                    Some("REGISTER") => RangeEvent::Register,
                    Some("SET_ATTR") => RangeEvent::SetAttr,
                    _ => return Err(bad("an unknown event")),
                },
                attrs,
            });
        }
    }
    let mut xnack = None;
    if has("kfdtool_metadata")? {
        let value: Option<String> = conn
            .query_row(
                "SELECT value FROM kfdtool_metadata WHERE tag = 'xnack' ORDER BY id DESC",
                [],
                |r| r.get(0),
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e.to_string()),
            })?;
        xnack = match value.as_deref() {
            None => None,
            Some("on") => Some(true),
            Some("off") => Some(false),
            Some(other) => return Err(format!("kfdtool_metadata: xnack {other:?}")),
        };
    }
    Ok((ranges, xnack))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_xnack_round_trip_and_bad_rows_are_named() {
        let conn = Connection::open_in_memory().unwrap();
        let ranges = vec![
            SvmRangeRecord {
                pid: 7,
                time_ns: 5,
                start: 0x20_0000,
                end: 0x60_0000,
                event: RangeEvent::Register,
                attrs: RangeAttrs {
                    granularity: Some(0),
                    preferred: Some(RangeLoc::System),
                    prefetch: Some(RangeLoc::Node(1)),
                    access: vec![(1, RangeAccess::InPlace), (2, RangeAccess::None)],
                    set_flags: 1,
                    clr_flags: 8,
                },
            },
            SvmRangeRecord {
                pid: 7,
                time_ns: 9,
                start: 0x20_0000,
                end: 0x40_0000,
                event: RangeEvent::SetAttr,
                attrs: RangeAttrs::default(),
            },
        ];
        write(&conn, "g", &ranges, Some(false)).unwrap();
        assert_eq!(read(&conn).unwrap(), (ranges, Some(false)));
        conn.execute(
            "UPDATE kfdtool_svm_range SET attrs = '{\"access\": 3}' WHERE id = 2",
            [],
        )
        .unwrap();
        assert_eq!(
            read(&conn).unwrap_err(),
            "kfdtool_svm_range row 2: malformed attrs"
        );
        // "undefined" survives the round trip.
        let undefined = RangeAttrs {
            preferred: Some(RangeLoc::Undefined),
            ..RangeAttrs::default()
        };
        assert_eq!(attrs_from(&attrs_json(&undefined)), Some(undefined));
        // A database without the tables: nothing, no error.
        let empty = Connection::open_in_memory().unwrap();
        assert_eq!(read(&empty).unwrap(), (Vec::new(), None));
    }

    /// What the model tells the observer becomes the table's rows: gpu_ids as node ids, the
    /// last access of a GPU winning, a registration told apart from a change, the XNACK mode
    /// of the caller.
    #[test]
    fn the_recorder_turns_observed_calls_into_rows() {
        use kfd_emu::model::{SvmObserver, SvmSetAttr};
        use kfd_ioctl::abi::{
            KFD_IOCTL_SVM_ATTR_ACCESS, KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE,
            KFD_IOCTL_SVM_ATTR_GRANULARITY, KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
            KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, KFD_IOCTL_SVM_LOCATION_UNDEFINED,
            kfd_ioctl_svm_attribute,
        };
        let attr = |t, value| kfd_ioctl_svm_attribute { r#type: t, value };
        let rec = SvmRecorder::new(vec![(0x1234, 2), (0x5678, 3)]);
        rec.set_attr(&SvmSetAttr {
            tgid: 42,
            time_ns: 7,
            start: 0x20_0000,
            size: 0x40_0000,
            registers: true,
            attrs: vec![
                attr(KFD_IOCTL_SVM_ATTR_ACCESS, 0x1234),
                attr(KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, 0x1234),
                attr(
                    KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
                    KFD_IOCTL_SVM_LOCATION_UNDEFINED,
                ),
                attr(KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, 0x5678),
                attr(KFD_IOCTL_SVM_ATTR_GRANULARITY, 99),
            ],
            xnack: false,
        });
        rec.xnack(42, true);
        rec.xnack(43, false);
        let (ranges, xnack) = rec.heard_so_far();
        assert_eq!(
            ranges,
            vec![SvmRangeRecord {
                pid: 42,
                time_ns: 7,
                start: 0x20_0000,
                end: 0x60_0000,
                event: RangeEvent::Register,
                attrs: RangeAttrs {
                    granularity: Some(0x3f),
                    preferred: Some(RangeLoc::Undefined),
                    prefetch: Some(RangeLoc::Node(3)),
                    access: vec![(2, RangeAccess::InPlace)],
                    set_flags: 0,
                    clr_flags: 0,
                },
            }]
        );
        assert_eq!(
            xnack.into_iter().collect::<Vec<_>>(),
            [(42, true), (43, false)]
        );
    }
}
