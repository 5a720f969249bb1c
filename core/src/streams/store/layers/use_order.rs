//! [`UseOrder`]: the keys of a record cache in the order they were last written, as a list
//! threaded through a slab, so that moving a key to the newest end, dropping one and taking
//! the oldest are each a few index writes rather than a search of an ordered map.

/// The end of the list: no link.
const NONE: usize = usize::MAX;

/// A place in the list, given when a key is pushed and kept by its cache entry.
pub(super) type Place = usize;

struct Link {
    /// The key; empty while the place is free.
    key: Box<[u8]>,
    /// Older neighbour, or the next free place while this one is free.
    older: usize,
    newer: usize,
}

/// Keys by last use, oldest first.
#[derive(Default)]
pub(super) struct UseOrder {
    links: Vec<Link>,
    oldest: Option<Place>,
    newest: Option<Place>,
    /// The first free place, whose `older` is the next.
    free: Option<Place>,
}

impl UseOrder {
    /// Puts `key` at the newest end, giving its place.
    pub(super) fn push_newest(&mut self, key: Box<[u8]>) -> Place {
        let link = Link {
            key,
            older: self.newest.unwrap_or(NONE),
            newer: NONE,
        };
        let place = match self.free {
            Some(place) => {
                self.free = some(self.links[place].older);
                self.links[place] = link;
                place
            }
            None => {
                self.links.push(link);
                self.links.len() - 1
            }
        };
        match self.newest {
            Some(newest) => self.links[newest].newer = place,
            None => self.oldest = Some(place),
        }
        self.newest = Some(place);
        place
    }

    /// Moves the key at `place` to the newest end.
    pub(super) fn touch(&mut self, place: Place) {
        if self.newest == Some(place) {
            return;
        }
        self.unlink(place);
        let link = &mut self.links[place];
        link.older = self.newest.unwrap_or(NONE);
        link.newer = NONE;
        match self.newest {
            Some(newest) => self.links[newest].newer = place,
            None => self.oldest = Some(place),
        }
        self.newest = Some(place);
    }

    /// Takes the key at `place` out of the list.
    pub(super) fn remove(&mut self, place: Place) -> Box<[u8]> {
        self.unlink(place);
        let link = &mut self.links[place];
        link.older = self.free.unwrap_or(NONE);
        link.newer = NONE;
        self.free = Some(place);
        std::mem::take(&mut link.key)
    }

    /// Takes the oldest key out of the list.
    pub(super) fn pop_oldest(&mut self) -> Option<Box<[u8]>> {
        let oldest = self.oldest?;
        Some(self.remove(oldest))
    }

    /// Forgets every key, keeping the room.
    pub(super) fn clear(&mut self) {
        self.links.clear();
        self.oldest = None;
        self.newest = None;
        self.free = None;
    }

    /// The keys, oldest first.
    #[cfg(test)]
    pub(super) fn keys(&self) -> Vec<&[u8]> {
        let mut keys = Vec::new();
        let mut at = self.oldest;
        while let Some(place) = at {
            keys.push(&self.links[place].key[..]);
            at = some(self.links[place].newer);
        }
        keys
    }

    /// Joins the neighbours of `place` to each other.
    fn unlink(&mut self, place: Place) {
        let (older, newer) = (self.links[place].older, self.links[place].newer);
        match some(older) {
            Some(older) => self.links[older].newer = newer,
            None => self.oldest = some(newer),
        }
        match some(newer) {
            Some(newer) => self.links[newer].older = older,
            None => self.newest = some(older),
        }
    }
}

fn some(link: usize) -> Option<Place> {
    (link != NONE).then_some(link)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Push(u8),
        Touch(usize),
        Remove(usize),
        PopOldest,
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => any::<u8>().prop_map(Op::Push),
            3 => any::<usize>().prop_map(Op::Touch),
            2 => any::<usize>().prop_map(Op::Remove),
            1 => Just(Op::PopOldest),
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        /// The list holds the keys in the order a plain vector of (place, key), moved to
        /// its end on every use, holds them.
        #[test]
        fn the_order_is_the_order_of_last_use(ops in proptest::collection::vec(op(), 0..200)) {
            let mut order = UseOrder::default();
            let mut model: Vec<(Place, Vec<u8>)> = Vec::new();
            for op in ops {
                match op {
                    Op::Push(k) => {
                        let place = order.push_newest(Box::from([k]));
                        prop_assert!(model.iter().all(|(p, _)| *p != place), "a place in use given again");
                        model.push((place, vec![k]));
                    }
                    Op::Touch(i) if !model.is_empty() => {
                        let used = model.remove(i % model.len());
                        order.touch(used.0);
                        model.push(used);
                    }
                    Op::Remove(i) if !model.is_empty() => {
                        let (place, key) = model.remove(i % model.len());
                        prop_assert_eq!(&order.remove(place)[..], &key[..]);
                    }
                    Op::PopOldest => {
                        let expected = (!model.is_empty()).then(|| model.remove(0).1);
                        prop_assert_eq!(order.pop_oldest().map(Vec::from), expected);
                    }
                    Op::Clear => {
                        order.clear();
                        model.clear();
                    }
                    Op::Touch(_) | Op::Remove(_) => {}
                }
                let keys: Vec<&[u8]> = model.iter().map(|(_, k)| &k[..]).collect();
                prop_assert_eq!(order.keys(), keys);
            }
        }
    }

    #[test]
    fn a_freed_place_is_used_again() {
        let mut order = UseOrder::default();
        let a = order.push_newest(Box::from(&b"a"[..]));
        order.push_newest(Box::from(&b"b"[..]));
        order.remove(a);
        assert_eq!(order.push_newest(Box::from(&b"c"[..])), a);
        assert_eq!(order.keys(), vec![&b"b"[..], &b"c"[..]]);
    }
}
