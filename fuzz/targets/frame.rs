//! The frame decoder both sides share, fed a stream cut at points the input chooses: the first
//! byte gives the limit, the second where the stream is cut; the rest is the stream.

use bytes::BytesMut;
use eddy_core::wire::frame::FrameDecoder;

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let [limit, cut, stream @ ..] = data else {
            return;
        };
        let decoder = FrameDecoder::new(usize::from(*limit) * 64);
        let cut = usize::from(*cut).min(stream.len());
        let mut buf = BytesMut::new();
        let mut taken = 0;
        for part in [&stream[..cut], &stream[cut..]] {
            buf.extend_from_slice(part);
            loop {
                let room = decoder.room(&buf);
                match decoder.decode(&mut buf) {
                    Ok(Some(frame)) => {
                        assert!(frame.len() <= decoder.limit());
                        taken += 4 + frame.len();
                    }
                    Ok(None) => {
                        assert!(room > 0, "a frame that needs bytes asks for room");
                        break;
                    }
                    Err(_) => return,
                }
            }
        }
        assert_eq!(taken + buf.len(), stream.len(), "no byte lost or made up");
    });
}
