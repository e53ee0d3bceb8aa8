//! tonic: placeholder until the retry layer lands.
