//! The processors of the stateless DSL operations: each is a [`Processor`] over a user
//! closure, shared by every task through an `Arc`.

use std::sync::Arc;

use crate::streams::processor::{Data, Processor, ProcessorContext};
use crate::streams::record::Record;
use crate::streams::StreamsError;

/// `filter` and `filter_not`: forwards the records whose predicate is `keep`.
pub(crate) struct Filter<F> {
    pub(crate) predicate: Arc<F>,
    pub(crate) keep: bool,
}

impl<K: Data, V: Data, F> Processor<K, V, K, V> for Filter<F>
where
    F: Fn(&K, &V) -> bool + Send + Sync + 'static,
{
    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K, V>,
    ) -> Result<(), StreamsError> {
        if (self.predicate)(&r.key, &r.value) == self.keep {
            ctx.forward(r);
        }
        Ok(())
    }
}

/// `map`: a new key and value from the old.
pub(crate) struct Map<F>(pub(crate) Arc<F>);

impl<K: Data, V: Data, K2: Data, V2: Data, F> Processor<K, V, K2, V2> for Map<F>
where
    F: Fn(K, V) -> (K2, V2) + Send + Sync + 'static,
{
    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K2, V2>,
    ) -> Result<(), StreamsError> {
        let (key, value) = (self.0)(r.key, r.value);
        ctx.forward(Record {
            key,
            value,
            timestamp: r.timestamp,
            headers: r.headers,
        });
        Ok(())
    }
}

/// `map_values` and `map_values_with_key`: a new value; the key stays.
pub(crate) struct MapValues<F>(pub(crate) Arc<F>);

impl<K: Data, V: Data, V2: Data, F> Processor<K, V, K, V2> for MapValues<F>
where
    F: Fn(&K, V) -> V2 + Send + Sync + 'static,
{
    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K, V2>,
    ) -> Result<(), StreamsError> {
        let value = (self.0)(&r.key, r.value);
        ctx.forward(Record {
            key: r.key,
            value,
            timestamp: r.timestamp,
            headers: r.headers,
        });
        Ok(())
    }
}

/// `flat_map`: any number of records from one.
pub(crate) struct FlatMap<F>(pub(crate) Arc<F>);

impl<K: Data, V: Data, K2: Data, V2: Data, I, F> Processor<K, V, K2, V2> for FlatMap<F>
where
    F: Fn(K, V) -> I + Send + Sync + 'static,
    I: IntoIterator<Item = (K2, V2)>,
{
    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K2, V2>,
    ) -> Result<(), StreamsError> {
        for (key, value) in (self.0)(r.key, r.value) {
            ctx.forward(Record {
                key,
                value,
                timestamp: r.timestamp,
                headers: r.headers.clone(),
            });
        }
        Ok(())
    }
}

/// `flat_map_values`: any number of values from one; the key stays.
pub(crate) struct FlatMapValues<F>(pub(crate) Arc<F>);

impl<K: Data, V: Data, V2: Data, I, F> Processor<K, V, K, V2> for FlatMapValues<F>
where
    F: Fn(&K, V) -> I + Send + Sync + 'static,
    I: IntoIterator<Item = V2>,
{
    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K, V2>,
    ) -> Result<(), StreamsError> {
        for value in (self.0)(&r.key, r.value) {
            ctx.forward(Record {
                key: r.key.clone(),
                value,
                timestamp: r.timestamp,
                headers: r.headers.clone(),
            });
        }
        Ok(())
    }
}

/// `select_key` and `group_by`: a new key from the record; the value stays.
pub(crate) struct SelectKey<F>(pub(crate) Arc<F>);

impl<K: Data, V: Data, K2: Data, F> Processor<K, V, K2, V> for SelectKey<F>
where
    F: Fn(&K, &V) -> K2 + Send + Sync + 'static,
{
    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K2, V>,
    ) -> Result<(), StreamsError> {
        let key = (self.0)(&r.key, &r.value);
        ctx.forward(r.with_key(key));
        Ok(())
    }
}

/// `peek` (forwards) and `foreach` (a terminal node): calls the action with each record.
pub(crate) struct Peek<F> {
    pub(crate) action: Arc<F>,
    pub(crate) forward: bool,
}

impl<K: Data, V: Data, F> Processor<K, V, K, V> for Peek<F>
where
    F: Fn(&K, &V) + Send + Sync + 'static,
{
    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K, V>,
    ) -> Result<(), StreamsError> {
        (self.action)(&r.key, &r.value);
        if self.forward {
            ctx.forward(r);
        }
        Ok(())
    }
}

/// `merge` and the pass-through filter before a repartition sink: forwards every record.
pub(crate) struct PassThrough;

impl<K: Data, V: Data> Processor<K, V, K, V> for PassThrough {
    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K, V>,
    ) -> Result<(), StreamsError> {
        ctx.forward(r);
        Ok(())
    }
}

/// `split`: each record goes to the first branch whose predicate holds, else to the default
/// branch if there is one.
pub(crate) struct Branch<K, V> {
    pub(crate) predicates: Arc<Vec<BranchPredicate<K, V>>>,
    /// The child names, in the order of the predicates, then the default branch's.
    pub(crate) children: Arc<Vec<String>>,
    pub(crate) default: bool,
}

/// The predicate of a branch.
pub(crate) type BranchPredicate<K, V> = Arc<dyn Fn(&K, &V) -> bool + Send + Sync>;

impl<K: Data, V: Data> Processor<K, V, K, V> for Branch<K, V> {
    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K, V>,
    ) -> Result<(), StreamsError> {
        for (i, p) in self.predicates.iter().enumerate() {
            if p(&r.key, &r.value) {
                return ctx.forward_to(&self.children[i], r);
            }
        }
        if self.default {
            return ctx.forward_to(&self.children[self.predicates.len()], r);
        }
        Ok(())
    }
}
